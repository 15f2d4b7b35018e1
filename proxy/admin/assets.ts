import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { GatewayError } from '../../kernel/errors.js';
import type { RequestContext, Route } from '../http/context.js';

/**
 * The consoles are static files of the repository's console/ folder (plain HTML, CSS and ES
 * modules: nothing to build, nothing fetched from elsewhere), served with a strict CSP.
 */
const CANDIDATES = ['../../console/', '../../../console/'].map((p) => fileURLToPath(new URL(p, import.meta.url)));
export const CONSOLE_DIR = CANDIDATES.find((d) => existsSync(d)) ?? CANDIDATES[0]!;

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

const SECURITY_HEADERS = {
  // Scripts and styles only from this origin; data only from this origin; no framing.
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

async function serve(ctx: RequestContext, file: string): Promise<void> {
  const ext = file.slice(file.lastIndexOf('.') + 1);
  // Read per request: a few kilobytes, and an edited file is served without a restart.
  const body = await readFile(CONSOLE_DIR + file);
  ctx.res.writeHead(200, { 'content-type': TYPES[ext] ?? 'application/octet-stream', 'content-length': body.length, ...SECURITY_HEADERS });
  ctx.res.end(ctx.method === 'HEAD' ? undefined : body);
}

/** /console/ (the page) and /console/<file> for the files one console uses; everything else is 404. */
export function consoleRoutes(page: string, files: readonly string[]): Route[] {
  const allowed = new Set(files);
  return [
    {
      method: 'GET',
      path: '/console',
      shape: 'openai',
      auth: 'none',
      handler: (ctx) => {
        ctx.res.writeHead(308, { location: '/console/' });
        ctx.res.end();
      },
    },
    { method: 'GET', path: '/console/', shape: 'openai', auth: 'none', handler: (ctx) => serve(ctx, page) },
    {
      method: 'GET',
      path: '/console/:file',
      name: '/console/{file}',
      shape: 'openai',
      auth: 'none',
      handler: (ctx) => {
        const file = ctx.params.file ?? '';
        if (!allowed.has(file)) throw new GatewayError('not_found', `no console file "${file.slice(0, 100)}"`);
        return serve(ctx, file);
      },
    },
  ];
}
