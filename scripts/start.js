#!/usr/bin/env node
// npm start: `tollgate ARGS` from this checkout's sources without a TypeScript loader in the
// process. scripts/transpile.js writes the sources as JavaScript into
// node_modules/.cache/tollgate-start (under a second, in a process that exits), then that
// JavaScript runs here. tsx's loader thread with its own heap, and its esbuild service, cost the
// quickstart about 60 MiB idle and more under load (bench/RESULTS.md, "Memory"). Every start
// transpiles, so what runs is always the checkout as it is now.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'node_modules/.cache/tollgate-start');
execFileSync(process.execPath, [join(root, 'scripts/transpile.js'), out], { stdio: 'inherit' });
// Source maps stay off: with them the quickstart held about 30 MiB more after 100,000 requests. Traces
// name the JavaScript under node_modules/.cache/tollgate-start (the same files, functions and
// order); `NODE_OPTIONS=--enable-source-maps npm start` names the TypeScript lines instead.
await import(pathToFileURL(join(out, 'cli/main.js')).href);
