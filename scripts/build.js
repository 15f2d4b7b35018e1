#!/usr/bin/env node
// npm run build: compiles the sources (tsconfig.build.json) into dist/ (or the folder given) and
// copies beside them the files they read at run time, so that `node bin/tollgate.js serve` and
// `operator` run from the build alone: the migrations, the discovery .proto, the quickstart, the
// consoles' static files.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = resolve(process.argv[2] ?? join(root, 'dist'));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(out, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', out], { stdio: 'inherit' });
for (const asset of ['proxy/store/migrations', 'api/snapshot/config_discovery.proto', 'examples/quickstart', 'console']) {
  mkdirSync(dirname(join(out, asset)), { recursive: true });
  cpSync(join(root, asset), join(out, asset), { recursive: true });
}
// bin/tollgate.js runs dist/ only when this marker is there and the sources are not.
writeFileSync(join(out, 'BUILD'), `${new Date().toISOString()}\n`);
