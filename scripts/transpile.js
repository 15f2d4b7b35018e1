#!/usr/bin/env node
// The sources as JavaScript for `npm start` (scripts/start.js runs this in a process of its own,
// which exits: esbuild's API keeps a worker thread and its service process alive once used).
// esbuild is the transpiler tsx itself runs, so the JavaScript is what `node bin/tollgate.js`
// runs. A file is rewritten only when its output changed, and atomically (a second quickstart
// started beside a running one never makes it read half a file); the files the sources read at
// run time are linked beside them.
import { buildSync } from 'esbuild';
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = process.argv[2] ?? join(root, 'node_modules/.cache/tollgate-start');
const FOLDERS = ['kernel', 'api', 'operator', 'proxy', 'cli', 'simulator'];
const ASSETS = ['proxy/store/migrations', 'api/snapshot/config_discovery.proto', 'console', 'examples'];

const sources = (dir) =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = join(dir, e.name);
    if (e.isDirectory()) return sources(rel);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts') ? [rel] : [];
  });

const { outputFiles } = buildSync({
  entryPoints: FOLDERS.flatMap(sources).map((f) => join(root, f)),
  outdir: out,
  outbase: root,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: 'linked',
  write: false,
  logLevel: 'warning',
});
for (const f of outputFiles) {
  if (existsSync(f.path) && readFileSync(f.path).equals(f.contents)) continue;
  mkdirSync(dirname(f.path), { recursive: true });
  const tmp = `${f.path}.${process.pid}.tmp`;
  writeFileSync(tmp, f.contents);
  renameSync(tmp, f.path);
}
for (const asset of ASSETS) {
  const link = join(out, asset);
  if (lstatSync(link, { throwIfNoEntry: false })) continue;
  mkdirSync(dirname(link), { recursive: true });
  try {
    symlinkSync(relative(dirname(link), join(root, asset)), link);
  } catch (err) {
    if (err.code !== 'EEXIST') throw err; // another start made it
  }
}
process.exit(0);
