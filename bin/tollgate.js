#!/usr/bin/env node
// The `tollgate` command. In a checkout (the TypeScript sources are here) it always runs the
// sources through tsx, so an old dist/ can never be run by mistake; in a built package (the
// image, `npm run build` output without the sources) it runs the compiled dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const sources = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
const built = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
if (existsSync(sources)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
} else if (existsSync(built)) {
  await import(built);
} else {
  process.stderr.write('tollgate: neither the sources (cli/main.ts) nor a build (dist/cli/main.js) is here: run npm run build\n');
  process.exit(1);
}
