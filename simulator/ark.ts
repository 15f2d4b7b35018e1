import { randomBytes } from 'node:crypto';
import { parseDirectives } from './directives.js';
import { publishFile } from './files.js';
import { mp4Buffer } from './mp4.js';
import { videoDirectives } from './openai-videos.js';
import { encodePng, MAX_PIXELS, seedOf } from './png.js';
import type { SimContext, SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';

/**
 * ByteDance ModelArk under /ark/api/v3 (the real bases are https://ark.ap-southeast.bytepluses.com/api/v3
 * and https://ark.cn-beijing.volces.com/api/v3), bearer key:
 *   POST   /ark/api/v3/images/generations            Seedream, synchronous: one PNG of `size` ("WxH", or 1K/2K/4K square) per call, by URL
 *   POST   /ark/api/v3/contents/generations/tasks    Seedance: {id}
 *   GET    /ark/api/v3/contents/generations/tasks/{id}   queued -> running -> succeeded (content.video_url) / failed
 *   DELETE /ark/api/v3/contents/generations/tasks/{id}   cancels a queued task (a running one: 400)
 * A task runs 100 ms + the simulator's latency + [sim:slow=MS]; its MP4 lasts `duration` seconds
 * (3/4 of it with [sim:short]). [sim:blocked] is refused at creation as Ark's input check does
 * (400 InputTextSensitiveContentDetected); [sim:fail] fails the task (OutputVideoSensitiveContentDetected
 * for videos, a 500 for images would be retried, so images answer 400 InvalidParameter);
 * [sim:429] and [sim:500] refuse the call.
 */
interface ArkTask {
  id: string;
  model: string;
  prompt: string;
  seconds: number;
  resolution: string;
  ratio: string;
  createdAt: number;
  readyAt: number;
  fail: boolean;
  cancelled: boolean;
  url?: string;
}

const BASE_RUN_MS = 100;
const MAX_TASKS = 1000;
const stores = new WeakMap<SimContext, Map<string, ArkTask>>();
function tasksOf(sim: SimContext) {
  let m = stores.get(sim);
  if (!m) stores.set(sim, (m = new Map<string, ArkTask>()));
  return m;
}

const arkError = (r: SimRequest, status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  sendJson(
    r,
    status,
    { error: { code, message, param: '', type: status === 401 ? 'Unauthorized' : status === 429 ? 'TooManyRequests' : 'BadRequest' } },
    headers,
  );

/** A bearer key, or none at all (the quickstart's routes carry none). */
function authorized(r: SimRequest): boolean {
  const a = r.req.headers.authorization;
  if (a === undefined || /^Bearer \S+$/.test(a)) return true;
  arkError(r, 401, 'AuthenticationError', 'The API key in the request is missing or invalid.');
  return false;
}

/** The shared refusals: rate limit, server error, input check. True when an answer was sent. */
function refused(r: SimRequest, prompt: string): boolean {
  const d = parseDirectives(prompt);
  if (d.status === 429) arkError(r, 429, 'RateLimitExceeded.EndpointRPMExceeded', 'Request rate limit exceeded (simulated).', { 'retry-after': '1' });
  else if (d.status === 500) arkError(r, 500, 'InternalServiceError', 'The service encountered an unexpected internal error (simulated).');
  else if (videoDirectives(prompt).blocked)
    arkError(r, 400, 'InputTextSensitiveContentDetected', 'The request failed because the input text may contain sensitive information (simulated).');
  else return false;
  return true;
}

const SIDE: Record<string, number> = { '1K': 1024, '2K': 2048, '4K': 4096 };

async function images(r: SimRequest): Promise<void> {
  if (!authorized(r)) return;
  const b = r.json ?? {};
  if (typeof b.prompt !== 'string' || b.prompt === '')
    return arkError(r, 400, 'MissingParameter', 'The request failed because it is missing the `prompt` parameter.');
  if (typeof b.model !== 'string') return arkError(r, 400, 'MissingParameter', 'The request failed because it is missing the `model` parameter.');
  const size = typeof b.size === 'string' ? b.size : '2048x2048';
  const m = /^(\d+)x(\d+)$/.exec(size);
  const [width, height] = m ? [Number(m[1]), Number(m[2])] : SIDE[size] ? [SIDE[size], SIDE[size]] : [0, 0];
  if (!width || !height || width * height > MAX_PIXELS || (/seedream-4/.test(b.model) && width * height < 1280 * 720))
    return arkError(r, 400, 'InvalidParameter', `The parameter \`size\` specified in the request is not valid: ${size}.`);
  if (refused(r, b.prompt)) return;
  if (parseDirectives(b.prompt).fail)
    return arkError(
      r,
      400,
      'OutputImageSensitiveContentDetected',
      'The request failed because the output image may contain sensitive information (simulated).',
    );
  await new Promise((res) => setTimeout(res, r.sim.latencyMs + parseDirectives(b.prompt as string).slowMs));
  const png = encodePng(width, height, seedOf(b.prompt));
  const url = publishFile(r.sim, `ark-${randomBytes(6).toString('hex')}.png`, png);
  sendJson(r, 200, {
    model: b.model,
    created: Math.floor(Date.now() / 1000),
    data: [{ url, size: `${width}x${height}` }],
    usage: { generated_images: 1, output_tokens: Math.round((width * height) / 256), total_tokens: Math.round((width * height) / 256) },
  });
}

function create(r: SimRequest): void {
  if (!authorized(r)) return;
  const b = r.json ?? {};
  const content = Array.isArray(b.content) ? (b.content as { type?: string; text?: string; role?: string; image_url?: { url?: string } }[]) : [];
  const prompt = content
    .filter((c) => c.type === 'text')
    .map((c) => c.text ?? '')
    .join(' ');
  if (typeof b.model !== 'string') return arkError(r, 400, 'MissingParameter', 'The request failed because it is missing the `model` parameter.');
  if (!prompt && content.length === 0) return arkError(r, 400, 'MissingParameter', 'The request failed because it is missing the `content` parameter.');
  const roles = content.filter((c) => c.type === 'image_url').map((c) => c.role ?? 'first_frame');
  if (roles.includes('reference_image') && roles.some((x) => x !== 'reference_image'))
    return arkError(r, 400, 'InvalidParameter', 'reference_image cannot be combined with first_frame or last_frame.');
  const duration = b.duration === undefined ? 5 : Number(b.duration);
  if (!Number.isInteger(duration) || duration < 2 || duration > 12)
    return arkError(r, 400, 'InvalidParameter', 'The parameter `duration` specified in the request is not valid.');
  if (refused(r, prompt)) return;
  const d = parseDirectives(prompt);
  const now = Date.now();
  const t: ArkTask = {
    id: `cgt-${new Date(now).toISOString().replace(/\D/g, '').slice(0, 14)}-${randomBytes(3).toString('hex')}`,
    model: b.model,
    prompt,
    seconds: duration * (videoDirectives(prompt).short ? 0.75 : 1),
    resolution: typeof b.resolution === 'string' ? b.resolution : '720p',
    ratio: typeof b.ratio === 'string' ? b.ratio : '16:9',
    createdAt: now,
    readyAt: now + BASE_RUN_MS + r.sim.latencyMs + d.slowMs,
    fail: d.fail,
    cancelled: false,
  };
  const m = tasksOf(r.sim);
  m.set(t.id, t);
  if (m.size > MAX_TASKS) m.delete(m.keys().next().value!);
  sendJson(r, 200, { id: t.id });
}

function statusOf(t: ArkTask, now = Date.now()): string {
  if (t.cancelled) return 'cancelled';
  if (now < t.readyAt) return now < t.createdAt + (t.readyAt - t.createdAt) / 2 ? 'queued' : 'running';
  return t.fail ? 'failed' : 'succeeded';
}

function find(r: SimRequest): ArkTask | undefined {
  if (!authorized(r)) return undefined;
  const t = tasksOf(r.sim).get(r.params.id ?? '');
  if (!t) arkError(r, 404, 'ResourceNotFound', `The specified task ${r.params.id} is not found.`);
  return t;
}

function get(r: SimRequest): void {
  const t = find(r);
  if (!t) return;
  const status = statusOf(t);
  if (status === 'succeeded' && !t.url) {
    const short = parseInt(t.resolution, 10) || 720;
    const m = /^(\d+):(\d+)$/.exec(t.ratio);
    const [rw, rh] = m ? [Number(m[1]), Number(m[2])] : [16, 9];
    const long = Math.round((short * Math.max(rw, rh)) / Math.min(rw, rh) / 2) * 2;
    const [width, height] = rw >= rh ? [long, short] : [short, long];
    t.url = publishFile(
      r.sim,
      `ark-${t.id}.mp4`,
      mp4Buffer({ durationMs: t.seconds * 1000, width, height, mediaBytes: 4096, seed: seedOf(t.prompt) }),
      'video/mp4',
    );
  }
  sendJson(r, 200, {
    id: t.id,
    model: t.model,
    status,
    ...(status === 'succeeded' ? { content: { video_url: t.url } } : {}),
    ...(status === 'failed'
      ? { error: { code: 'OutputVideoSensitiveContentDetected', message: 'The generated video may contain sensitive information (simulated).' } }
      : {}),
    ...(status === 'succeeded' ? { usage: { completion_tokens: 246840, total_tokens: 246840 }, seed: seedOf(t.prompt), duration: Math.round(t.seconds) } : {}),
    resolution: t.resolution,
    ratio: t.ratio,
    framespersecond: 24,
    created_at: Math.floor(t.createdAt / 1000),
    updated_at: Math.floor(Date.now() / 1000),
  });
}

function cancel(r: SimRequest): void {
  const t = find(r);
  if (!t) return;
  if (statusOf(t) === 'running') return arkError(r, 400, 'InvalidAction.TaskRunning', 'A running task cannot be cancelled.');
  if (statusOf(t) === 'queued') t.cancelled = true;
  r.res.writeHead(200, { 'content-type': 'application/json' });
  r.res.end('{}');
}

export const arkRoutes: SimRoute[] = [
  { method: 'POST', path: '/ark/api/v3/images/generations', handler: images },
  { method: 'POST', path: '/ark/api/v3/contents/generations/tasks', handler: create },
  { method: 'GET', path: '/ark/api/v3/contents/generations/tasks/:id', handler: get },
  { method: 'DELETE', path: '/ark/api/v3/contents/generations/tasks/:id', handler: cancel },
];
