#!/usr/bin/env node
// Runs the TypeScript sources directly (tsx) unless a build exists in dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const built = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
if (existsSync(built) && !process.env.TOLLGATE_FROM_SOURCE) {
  await import(built);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
}
