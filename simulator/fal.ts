import { randomUUID } from 'node:crypto';
import { parseDirectives } from './directives.js';
import { publishFile } from './files.js';
import { mp4Buffer } from './mp4.js';
import { videoDirectives } from './openai-videos.js';
import { encodePng, MAX_PIXELS, seedOf } from './png.js';
import type { SimContext, SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';

/**
 * fal.ai's queue API under /fal (the real base is https://queue.fal.run):
 *   POST /fal/{endpoint id}                          queue a request: {request_id, status_url, response_url, cancel_url}
 *   GET  /fal/{owner}/{app}/requests/{id}/status     IN_QUEUE (202) -> IN_PROGRESS (202) -> COMPLETED (200)
 *   GET  /fal/{owner}/{app}/requests/{id}            the result: {video: {url,...}} or {images: [{url,...}]}, or the run's error
 *   PUT  /fal/{owner}/{app}/requests/{id}/cancel     202 CANCELLATION_REQUESTED, 400 ALREADY_COMPLETED
 * Status, result and cancel answer 404 unless {owner}/{app} are the first two segments of the
 * endpoint id the request was queued on, as fal's do. A request runs 100 ms + the simulator's
 * latency + [sim:slow=MS]. An endpoint id containing "video", or an input with a duration, makes
 * an MP4 of the duration asked ("5", 5 or "8s"; 3/4 of it with [sim:short]); else PNGs sized by
 * image_size {width,height}, else aspect_ratio at resolution (1K/2K/4K), num_images of them.
 * [sim:fail] fails the run (the result answers 500 with a detail); [sim:blocked] fails it as
 * fal's content checker does (422, type content_policy_violation), and its COMPLETED status
 * names the error as newer queue answers do (`error`, `error_type`); [sim:429] and [sim:500]
 * refuse the submission. An Authorization header other than "Key <key>" is a 401.
 */
interface FalRequest {
  id: string;
  endpoint: string;
  owner: string;
  app: string;
  input: Record<string, unknown>;
  createdAt: number;
  readyAt: number;
  fail: boolean;
  cancelledAt?: number;
  result?: Record<string, unknown>;
}

const BASE_RUN_MS = 100;
const BLOCKED = 'The content could not be processed because it contained material flagged by a content checker.';
const MAX_REQUESTS = 1000;
const stores = new WeakMap<SimContext, Map<string, FalRequest>>();
function requestsOf(sim: SimContext) {
  let m = stores.get(sim);
  if (!m) stores.set(sim, (m = new Map<string, FalRequest>()));
  return m;
}

const detail = (r: SimRequest, status: number, d: unknown, headers: Record<string, string> = {}) => sendJson(r, status, { detail: d }, headers);

function authorized(r: SimRequest): boolean {
  const a = r.req.headers.authorization;
  if (a === undefined || /^Key \S+$/.test(a)) return true;
  detail(r, 401, 'Authentication is required to access this application. Use "Authorization: Key <key>".');
  return false;
}

const urlsOf = (sim: SimContext, q: FalRequest) => {
  const base = `${sim.url}/fal/${q.owner}/${q.app}/requests/${q.id}`;
  return { response_url: base, status_url: `${base}/status`, cancel_url: `${base}/cancel` };
};

function submit(r: SimRequest): void {
  if (!authorized(r)) return;
  const segments = r.path.split('/').slice(2);
  const input = r.json;
  if (!input) return detail(r, 422, [{ loc: ['body'], msg: 'Input should be a valid JSON object', type: 'model_attributes_type' }]);
  if (typeof input.prompt !== 'string' || input.prompt === '') return detail(r, 422, [{ loc: ['body', 'prompt'], msg: 'Field required', type: 'missing' }]);
  const d = parseDirectives(input.prompt);
  if (d.status === 429) return detail(r, 429, 'Too many requests (simulated).', { 'retry-after': '1' });
  if (d.status === 500) return detail(r, 500, 'Internal server error (simulated).');
  const now = Date.now();
  const q: FalRequest = {
    id: randomUUID(),
    endpoint: segments.join('/'),
    owner: segments[0]!,
    app: segments[1]!,
    input,
    createdAt: now,
    readyAt: now + BASE_RUN_MS + r.sim.latencyMs + d.slowMs,
    fail: d.fail,
  };
  const m = requestsOf(r.sim);
  m.set(q.id, q);
  if (m.size > MAX_REQUESTS) m.delete(m.keys().next().value!);
  sendJson(r, 200, { request_id: q.id, ...urlsOf(r.sim, q), queue_position: 0 });
}

function find(r: SimRequest): FalRequest | undefined {
  if (!authorized(r)) return undefined;
  const q = requestsOf(r.sim).get(r.params.id ?? '');
  if (!q || q.owner !== r.params.owner || q.app !== r.params.app) {
    detail(r, 404, `Request ${r.params.id} not found`);
    return undefined;
  }
  return q;
}

const stateOf = (q: FalRequest, now = Date.now()) =>
  q.cancelledAt !== undefined || now >= q.readyAt ? 'COMPLETED' : now < q.createdAt + (q.readyAt - q.createdAt) / 2 ? 'IN_QUEUE' : 'IN_PROGRESS';

function status(r: SimRequest): void {
  const q = find(r);
  if (!q) return;
  const s = stateOf(q);
  sendJson(r, s === 'COMPLETED' ? 200 : 202, {
    status: s,
    request_id: q.id,
    ...urlsOf(r.sim, q),
    ...(s === 'IN_QUEUE' ? { queue_position: 0 } : {}),
    ...(r.query.get('logs') === '1' ? { logs: [] } : {}),
    ...(s === 'COMPLETED' ? { metrics: { inference_time: (q.readyAt - q.createdAt) / 1000 } } : {}),
    ...(s === 'COMPLETED' && q.cancelledAt === undefined && videoDirectives(String(q.input.prompt)).blocked
      ? { error: `${BLOCKED} (simulated)`, error_type: 'content_policy_violation' }
      : {}),
  });
}

const isVideo = (q: FalRequest) => /video/i.test(q.endpoint) || q.input.duration !== undefined;

function result(r: SimRequest): void {
  const q = find(r);
  if (!q) return;
  const s = stateOf(q);
  if (s !== 'COMPLETED') return detail(r, 400, 'Request is still in progress');
  if (q.cancelledAt !== undefined) return detail(r, 400, 'Request was cancelled');
  const prompt = String(q.input.prompt);
  if (q.fail) return detail(r, 500, 'The model failed to generate an output (simulated).');
  if (videoDirectives(prompt).blocked)
    return detail(r, 422, [
      {
        loc: ['body', 'prompt'],
        msg: `${BLOCKED} (simulated)`,
        type: 'content_policy_violation',
      },
    ]);
  q.result ??= isVideo(q) ? videoResult(r.sim, q) : imageResult(r.sim, q);
  sendJson(r, 200, q.result);
}

function videoResult(sim: SimContext, q: FalRequest): Record<string, unknown> {
  const prompt = String(q.input.prompt);
  const asked = parseFloat(scalar(q.input.duration, '5')) || 5;
  const seconds = asked * (videoDirectives(prompt).short ? 0.75 : 1);
  const short = parseInt(scalar(q.input.resolution, '720'), 10) || 720;
  const m = /^(\d+):(\d+)$/.exec(scalar(q.input.aspect_ratio, '16:9'));
  const [rw, rh] = m ? [Number(m[1]), Number(m[2])] : [16, 9];
  const long = Math.round((short * Math.max(rw, rh)) / Math.min(rw, rh) / 2) * 2;
  const [width, height] = rw >= rh ? [long, short] : [short, long];
  const data = mp4Buffer({ durationMs: seconds * 1000, width, height, mediaBytes: 4096, seed: seedOf(prompt) });
  const url = publishFile(sim, `fal-${q.id}.mp4`, data, 'video/mp4');
  return { video: { url, content_type: 'video/mp4', file_name: 'output.mp4', file_size: data.length }, seed: seedOf(prompt) };
}

function imageResult(sim: SimContext, q: FalRequest): Record<string, unknown> {
  const { width, height } = sizeOf(q.input);
  const n = Math.min(4, Math.max(1, Number(q.input.num_images ?? 1) || 1));
  const images = Array.from({ length: n }, (_, i) => {
    const data = encodePng(width, height, seedOf(`${String(q.input.prompt)}#${i}`));
    return { url: publishFile(sim, `fal-${q.id}-${i}.png`, data), width, height, content_type: 'image/png', file_size: data.length };
  });
  return { images, seed: seedOf(String(q.input.prompt)), has_nsfw_concepts: images.map(() => false), prompt: q.input.prompt };
}

function sizeOf(input: Record<string, unknown>): { width: number; height: number } {
  const s = input.image_size as { width?: unknown; height?: unknown } | undefined;
  const w = Number(s?.width);
  const h = Number(s?.height);
  if (Number.isInteger(w) && Number.isInteger(h) && w >= 16 && h >= 16 && w * h <= MAX_PIXELS) return { width: w, height: h };
  const side = ({ '1K': 1024, '2K': 2048, '4K': 4096 } as Record<string, number>)[String(input.resolution)] ?? 1024;
  const m = /^(\d+):(\d+)$/.exec(scalar(input.aspect_ratio, '1:1'));
  const [rw, rh] = m ? [Number(m[1]), Number(m[2])] : [1, 1];
  const other = Math.max(16, Math.round((side * Math.min(rw, rh)) / Math.max(rw, rh)));
  return rw >= rh ? { width: side, height: other } : { width: other, height: side };
}

function cancel(r: SimRequest): void {
  const q = find(r);
  if (!q) return;
  if (stateOf(q) === 'COMPLETED') return sendJson(r, 400, { status: 'ALREADY_COMPLETED' });
  q.cancelledAt = Date.now();
  sendJson(r, 202, { status: 'CANCELLATION_REQUESTED' });
}

/** Endpoint ids have two to six segments ("fal-ai/flux/dev", "fal-ai/kling-video/v2.1/pro/image-to-video"). */
const submitRoutes: SimRoute[] = [2, 3, 4, 5, 6].map((n) => ({
  method: 'POST',
  path: `/fal${Array.from({ length: n }, (_, i) => `/:s${i}`).join('')}`,
  handler: submit,
}));

export const falRoutes: SimRoute[] = [
  { method: 'GET', path: '/fal/:owner/:app/requests/:id/status', handler: status },
  { method: 'GET', path: '/fal/:owner/:app/requests/:id', handler: result },
  { method: 'PUT', path: '/fal/:owner/:app/requests/:id/cancel', handler: cancel },
  ...submitRoutes,
];

/** An input field as text, or the default when absent or not a scalar. */
export function scalar(v: unknown, dflt: string): string {
  return typeof v === 'string' || typeof v === 'number' ? String(v) : dflt;
}
