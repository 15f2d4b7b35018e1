import { spawn } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
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
 *
 * The cluster is made in a sibling folder and moved in, PG_VERSION last: a first start cut short
 * (a crash, a kill) leaves no half-made cluster that would not open, and the next start makes it
 * again.
 */
export async function initdbApart(dataDir: string): Promise<void> {
  if (existsSync(join(dataDir, 'PG_VERSION'))) return;
  const made = `${dataDir}.initdb`;
  try {
    rmSync(made, { recursive: true, force: true });
    await runInitdb(made, dataDir);
    const entries = readdirSync(made).sort((a, b) => Number(a === 'PG_VERSION') - Number(b === 'PG_VERSION'));
    for (const name of entries) {
      // Leftovers of a start cut short; the folder's other files (the lock's socket) are not the cluster's.
      rmSync(join(dataDir, name), { recursive: true, force: true });
      renameSync(join(made, name), join(dataDir, name));
    }
  } catch (err) {
    throw err instanceof InitdbError ? err : new InitdbError(`initdb of ${dataDir} failed: ${(err as Error).message}`);
  } finally {
    try {
      rmSync(made, { recursive: true, force: true });
    } catch {
      // Nothing was made where nothing can be (a path under a file): the error above says why.
    }
  }
}

/** initdb into `into`; errors name `dataDir`, the folder the user gave. */
async function runInitdb(into: string, dataDir: string): Promise<void> {
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
      env: { PATH: process.env.PATH ?? '', TOLLGATE_PGLITE_ENTRY: entry, TOLLGATE_PGLITE_DIR: into },
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
