import { parseDirectives, sleep, type Directives } from './directives.js';
import { publishFile } from './files.js';
import { parseMultipart, type FormPart } from './multipart.js';
import { encodePng, MAX_PIXELS, pngSize, seedOf } from './png.js';
import { openaiError } from './openai-error.js';
import type { SimRequest, SimRoute } from './server.js';
import { simId } from './text.js';

/**
 * OpenAI Images as api.openai.com answers it: POST /v1/images/generations (JSON) and
 * POST /v1/images/edits (multipart: image or image[] files, optional mask). Answers carry real
 * PNGs of the size asked, base64 by default or as URLs on the simulator with
 * response_format "url". Prompt directives: [sim:429], [sim:500], [sim:slow=MS], and [sim:fail],
 * which the safety system "rejects" (400 content_policy_violation).
 */
function failure(r: SimRequest, d: Directives): boolean {
  if (d.status === 429)
    openaiError(r, 429, 'Rate limit reached for images per minute (simulated).', 'requests', 'rate_limit_exceeded', null, { 'retry-after': '1' });
  else if (d.status === 500) openaiError(r, 500, 'The server had an error while processing your request (simulated).', 'server_error', null);
  else if (d.fail)
    openaiError(r, 400, 'Your request was rejected as a result of our safety system (simulated).', 'image_generation_user_error', 'content_policy_violation');
  else return false;
  return true;
}

/** "1024x1024" -> pixels; "auto" or absent -> fallback. */
function sizeOf(size: unknown, fallback: { width: number; height: number }): { width: number; height: number } | undefined {
  if (size === undefined || size === null || size === 'auto') return fallback;
  const m = typeof size === 'string' ? /^(\d+)x(\d+)$/.exec(size) : null;
  if (!m) return undefined;
  const width = Number(m[1]);
  const height = Number(m[2]);
  if (width < 16 || height < 16 || width * height > MAX_PIXELS) return undefined;
  return { width, height };
}

function answer(r: SimRequest, prompt: string, n: number, size: { width: number; height: number }, asUrl: boolean, quality: string): void {
  const data = Array.from({ length: n }, (_, i) => {
    const png = encodePng(size.width, size.height, seedOf(`${prompt}#${i}`));
    return asUrl ? { url: publishFile(r.sim, `${simId('img-')}.png`, png) } : { b64_json: png.toString('base64') };
  });
  const body = JSON.stringify({
    created: Math.floor(Date.now() / 1000),
    background: 'opaque',
    data,
    output_format: 'png',
    quality,
    size: `${size.width}x${size.height}`,
    usage: {
      input_tokens: Math.ceil(prompt.length / 4),
      output_tokens: 1056 * n,
      total_tokens: Math.ceil(prompt.length / 4) + 1056 * n,
      input_tokens_details: { image_tokens: 0, text_tokens: Math.ceil(prompt.length / 4) },
    },
  });
  r.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': simId('req_') });
  r.res.end(body);
}

function common(r: SimRequest, f: { model?: unknown; prompt?: unknown; n?: unknown }): { prompt: string; n: number } | undefined {
  if (typeof f.model !== 'string' || typeof f.prompt !== 'string' || f.prompt === '') {
    openaiError(r, 400, "Invalid request: 'model' and 'prompt' are required.", 'invalid_request_error', null, typeof f.model !== 'string' ? 'model' : 'prompt');
    return undefined;
  }
  const n = f.n === undefined ? 1 : Number(f.n);
  if (!Number.isInteger(n) || n < 1 || n > 10) {
    openaiError(r, 400, `Invalid 'n': must be an integer from 1 to 10.`, 'invalid_request_error', 'invalid_value', 'n');
    return undefined;
  }
  return { prompt: f.prompt, n };
}

async function generations(r: SimRequest): Promise<void> {
  const body = r.json ?? {};
  const c = common(r, body);
  if (!c) return;
  const d = parseDirectives(c.prompt);
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted || failure(r, d)) return;
  const size = sizeOf(body.size, { width: 1024, height: 1024 });
  if (!size) return openaiError(r, 400, `Invalid size '${String(body.size)}'.`, 'invalid_request_error', 'invalid_value', 'size');
  answer(r, c.prompt, c.n, size, body.response_format === 'url', typeof body.quality === 'string' ? body.quality : 'auto');
}

async function edits(r: SimRequest): Promise<void> {
  const parts = parseMultipart(r.body, r.req.headers['content-type']);
  if (!parts) return openaiError(r, 400, 'Invalid request: the body must be multipart/form-data.', 'invalid_request_error', null);
  const field = (name: string) => parts.find((p) => p.name === name && p.filename === undefined)?.data.toString('utf8');
  const images: FormPart[] = parts.filter((p) => (p.name === 'image' || p.name === 'image[]') && p.filename !== undefined);
  const mask = parts.find((p) => p.name === 'mask' && p.filename !== undefined);
  const c = common(r, { model: field('model'), prompt: field('prompt'), n: field('n') });
  if (!c) return;
  if (images.length === 0) return openaiError(r, 400, "Invalid request: 'image' is required.", 'invalid_request_error', null, 'image');
  const first = pngSize(images[0]!.data);
  if (images.some((i) => !pngSize(i.data) && i.data.subarray(0, 3).toString('hex') !== 'ffd8ff')) {
    return openaiError(r, 400, 'Invalid image file or mode for image 1, please check your image file.', 'invalid_request_error', 'invalid_image_file', 'image');
  }
  if (mask && !pngSize(mask.data)) return openaiError(r, 400, 'Invalid mask image: it must be a PNG.', 'invalid_request_error', 'invalid_image_file', 'mask');
  const d = parseDirectives(c.prompt);
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted || failure(r, d)) return;
  const size = sizeOf(field('size'), first ?? { width: 1024, height: 1024 });
  if (!size) return openaiError(r, 400, `Invalid size '${field('size')}'.`, 'invalid_request_error', 'invalid_value', 'size');
  answer(r, `${c.prompt}|edit|${mask ? 'mask' : ''}`, c.n, size, field('response_format') === 'url', field('quality') ?? 'auto');
}

export const openaiImageRoutes: SimRoute[] = [
  { method: 'POST', path: '/v1/images/generations', handler: generations },
  { method: 'POST', path: '/v1/images/edits', handler: edits },
];
