import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export class InitdbError extends Error {
  override name = 'InitdbError';
}

/**
 * Creates the database cluster of a new PGlite data folder in a short-lived Node process.
 *
 * PGlite runs initdb in a second PostgreSQL of its own (a WebAssembly memory, a copy of it, the
 * initdb program, a tarball of the new cluster): the gateway's first start peaked near 800 MB and
 * kept what the WebAssembly compiler had allocated twice. In a child, all of it goes back to the
 * system when the child exits, and the gateway opens the folder as it does on every restart. The
 * child compiles PGlite with Liftoff alone (pglite-options.ts says why): a first start took 4.5-4.8 s
 * of initdb in the child plus about 1 s to open, against 6-9 s in the process before, on the
 * first start only. A folder that already holds a cluster (PG_VERSION) is left alone.
 */
export async function initdbApart(dataDir: string): Promise<void> {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return;
  // The CommonJS entry: `node -e` evaluates a CommonJS script, so require() needs no loader.
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  const script = `(async () => {
    const { PGlite } = require(process.env.TOLLGATE_PGLITE_ENTRY);
    const db = new PGlite({ dataDir: process.env.TOLLGATE_PGLITE_DIR });
    await db.waitReady;
    await db.close();
  })().catch((err) => {
    // PGlite rejects with plain objects too (an exit status of its WebAssembly PostgreSQL).
    const text = err instanceof Error ? err.stack : JSON.stringify(err);
    process.stderr.write(String(text));
    process.exit(1);
  });`;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ['--liftoff-only', '-e', script], {
      // Only what the script reads, and no NODE_OPTIONS: a loader of the parent's (tsx) is not needed.
      env: { PATH: process.env.PATH ?? '', TOLLGATE_PGLITE_ENTRY: entry, TOLLGATE_PGLITE_DIR: dataDir },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)));
    child.on('error', (err) => reject(new InitdbError(`initdb of ${dataDir} could not start: ${err.message}`)));
    child.on('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new InitdbError(`initdb of ${dataDir} failed (${signal ?? `exit ${code}`}): ${stderr.trim() || 'no output'}`)),
    );
  });
}
