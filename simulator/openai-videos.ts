import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseDirectives } from './directives.js';
import { mp4File } from './mp4.js';
import { parseMultipart } from './multipart.js';
import { openaiError } from './openai-error.js';
import type { SimContext, SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';
import { simId } from './text.js';

/**
 * OpenAI's videos API as api.openai.com answers it: POST /v1/videos (JSON, or multipart as the
 * official SDK sends it) creates a job, GET /v1/videos/{id} reports it (queued, in_progress,
 * completed, failed), GET /v1/videos/{id}/content streams a real MP4 whose movie header carries
 * the reported duration. A job runs 100 ms + the simulator's latency + [sim:slow=MS].
 *
 * Video directives in the prompt:
 *   [sim:short]    the video comes out at 3/4 of the asked seconds (8 -> 6, 5 -> 3.75), and
 *                  `seconds` reports that actual duration once completed
 *   [sim:fail]     the job fails after running (status failed, error video_generation_failed)
 *   [sim:blocked]  the safety system refuses the creation: 400 moderation_blocked
 *   [sim:mb=N]     the MP4 carries N MiB of media data (default 16 KiB), streamed as it is sent
 *   [sim:429], [sim:500] refuse the creation
 */

interface Job {
  id: string;
  model: string;
  prompt: string;
  seconds: number;
  actualSeconds: number;
  size: string;
  createdAt: number;
  readyAt: number;
  fail: boolean;
  mediaBytes: number;
  inputReference: unknown;
}

const BASE_RUN_MS = 100;
const MAX_JOBS = 1000;
const DEFAULT_MEDIA_BYTES = 16 * 1024;
const MAX_MEDIA_BYTES = 1024 * 1024 * 1024;
const SORA_SECONDS = ['4', '8', '12'];
const SORA_SIZES = ['720x1280', '1280x720', '1024x1792', '1792x1024'];

const stores = new WeakMap<SimContext, Map<string, Job>>();
function jobsOf(sim: SimContext) {
  let m = stores.get(sim);
  if (!m) stores.set(sim, (m = new Map<string, Job>()));
  return m;
}

/** The video-only directives; the shared ones (fail, 429, 500, slow) come from parseDirectives. */
export function videoDirectives(prompt: string): { short: boolean; blocked: boolean; mediaBytes: number } {
  const mb = /\[sim:mb=(\d+)\]/.exec(prompt);
  return {
    short: prompt.includes('[sim:short]'),
    blocked: prompt.includes('[sim:blocked]'),
    mediaBytes: mb ? Math.min(MAX_MEDIA_BYTES, Number(mb[1]) * 1024 * 1024) : DEFAULT_MEDIA_BYTES,
  };
}

function view(j: Job) {
  const now = Date.now();
  const done = now >= j.readyAt;
  const status = !done ? (now < j.createdAt + (j.readyAt - j.createdAt) / 2 ? 'queued' : 'in_progress') : j.fail ? 'failed' : 'completed';
  return {
    id: j.id,
    object: 'video',
    created_at: Math.floor(j.createdAt / 1000),
    completed_at: done ? Math.floor(j.readyAt / 1000) : null,
    error: status === 'failed' ? { code: 'video_generation_failed', message: 'The video could not be generated (simulated).' } : null,
    expires_at: done ? Math.floor(j.readyAt / 1000) + 3600 : null,
    model: j.model,
    progress: done ? 100 : Math.floor((100 * (now - j.createdAt)) / (j.readyAt - j.createdAt)),
    prompt: j.prompt,
    remixed_from_video_id: null,
    seconds: status === 'completed' ? String(j.actualSeconds) : String(j.seconds),
    size: j.size,
    status,
  };
}

/** The create body's fields, from JSON or multipart/form-data. */
function fieldsOf(r: SimRequest): Record<string, unknown> | undefined {
  if (r.json) return r.json;
  const parts = parseMultipart(r.body, r.req.headers['content-type']);
  if (!parts) return undefined;
  const out: Record<string, unknown> = {};
  for (const p of parts) out[p.name] = p.filename !== undefined ? { file: p.filename, bytes: p.data.length } : p.data.toString('utf8');
  return out;
}

function create(r: SimRequest): void {
  const f = fieldsOf(r);
  if (!f || typeof f.prompt !== 'string' || f.prompt === '')
    return openaiError(r, 400, "Invalid request: 'prompt' is required.", 'invalid_request_error', 'missing_required_parameter', 'prompt');
  const model = typeof f.model === 'string' ? f.model : 'sora-2';
  const sora = model.startsWith('sora');
  const seconds = f.seconds === undefined ? '4' : scalar(f.seconds);
  if (sora ? !SORA_SECONDS.includes(seconds) : !/^\d{1,4}$/.test(seconds) || Number(seconds) < 1) {
    return openaiError(r, 400, `Invalid value for 'seconds': '${seconds}'.`, 'invalid_request_error', 'invalid_value', 'seconds');
  }
  const size = f.size === undefined ? '720x1280' : scalar(f.size);
  if (sora ? !SORA_SIZES.includes(size) : !/^\d{2,4}x\d{2,4}$/.test(size))
    return openaiError(r, 400, `Invalid value for 'size': '${size}'.`, 'invalid_request_error', 'invalid_value', 'size');
  const d = parseDirectives(f.prompt);
  const v = videoDirectives(f.prompt);
  if (d.status === 429)
    return openaiError(r, 429, 'Rate limit reached for videos per minute (simulated).', 'requests', 'rate_limit_exceeded', null, { 'retry-after': '1' });
  if (d.status === 500) return openaiError(r, 500, 'The server had an error while processing your request (simulated).', 'server_error', null);
  if (v.blocked)
    return openaiError(r, 400, 'Your request was blocked by our moderation system (simulated).', 'invalid_request_error', 'moderation_blocked', 'prompt');
  const now = Date.now();
  const asked = Number(seconds);
  const j: Job = {
    id: simId('video_'),
    model,
    prompt: f.prompt,
    seconds: asked,
    actualSeconds: v.short ? (asked * 3) / 4 : asked,
    size,
    createdAt: now,
    readyAt: now + BASE_RUN_MS + r.sim.latencyMs + d.slowMs,
    fail: d.fail,
    mediaBytes: v.mediaBytes,
    inputReference: f.input_reference ?? null,
  };
  const m = jobsOf(r.sim);
  m.set(j.id, j);
  if (m.size > MAX_JOBS) m.delete(m.keys().next().value!);
  sendJson(r, 200, view(j), { 'x-request-id': simId('req_') });
}

function find(r: SimRequest): Job | undefined {
  const j = jobsOf(r.sim).get(r.params.id ?? '');
  if (!j) openaiError(r, 404, `Video '${r.params.id}' not found.`, 'invalid_request_error', 'not_found', 'video_id');
  return j;
}

async function content(r: SimRequest): Promise<void> {
  const j = find(r);
  if (!j) return;
  if (view(j).status !== 'completed')
    return openaiError(r, 409, 'Video is not ready yet; poll until its status is completed.', 'invalid_request_error', 'video_not_ready');
  const [width, height] = j.size.split('x').map(Number) as [number, number];
  const file = mp4File({ durationMs: j.actualSeconds * 1000, width, height, mediaBytes: j.mediaBytes, seed: j.createdAt });
  r.res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': file.size });
  await pipeline(Readable.from(file.chunks(), { objectMode: false }), r.res).catch(() => r.res.destroy());
}

export const openaiVideoRoutes: SimRoute[] = [
  { method: 'POST', path: '/v1/videos', handler: create },
  {
    method: 'GET',
    path: '/v1/videos/:id',
    handler: (r) => {
      const j = find(r);
      if (j) sendJson(r, 200, view(j), { 'x-request-id': simId('req_') });
    },
  },
  { method: 'GET', path: '/v1/videos/:id/content', handler: content },
];

/** A form field as the text it was sent as; objects (never sent by a real client) become empty. */
function scalar(v: unknown): string {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : '';
}
