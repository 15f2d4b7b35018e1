import { parseDirectives } from './directives.js';
import { publishFile } from './files.js';
import { mp4Buffer } from './mp4.js';
import { videoDirectives } from './openai-videos.js';
import { encodePng, MAX_PIXELS, seedOf } from './png.js';
import type { SimContext, SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';
import { simId } from './text.js';

/**
 * A Replicate-style predictions API: POST /v1/predictions ({version, input}) or
 * POST /v1/models/{owner}/{name}/predictions ({input}) creates a prediction that runs for
 * 100 ms + the simulator's latency + [sim:slow=MS]; GET /v1/predictions/{id} polls it;
 * POST /v1/predictions/{id}/cancel cancels it. Outputs are PNG URLs on the simulator, sized by
 * input width/height, else aspect_ratio at the resolution tier's side. [sim:fail] makes the
 * prediction fail; [sim:429] and [sim:500] refuse the creation. A prediction whose input has a
 * `duration` is a video: its output is one MP4 URL of that many seconds (3/4 of them with
 * [sim:short]); [sim:blocked] fails it as flagged content (E005), as Replicate does.
 * [sim:poll500] makes every GET of the prediction answer 500 (an upstream failing after acceptance).
 */
interface Prediction {
  id: string;
  model: string;
  version: string | null;
  input: Record<string, unknown>;
  createdAt: number;
  readyAt: number;
  fail: boolean;
  canceledAt?: number;
  output?: string[] | string;
}

const BASE_RUN_MS = 100;
const MAX_PREDICTIONS = 1000;
const stores = new WeakMap<SimContext, Map<string, Prediction>>();
function predictionsOf(sim: SimContext) {
  let m = stores.get(sim);
  if (!m) stores.set(sim, (m = new Map<string, Prediction>()));
  return m;
}

const problem = (r: SimRequest, status: number, title: string, detail: string, headers: Record<string, string> = {}) =>
  sendJson(r, status, { title, detail, status }, headers);

function sizeOf(input: Record<string, unknown>): { width: number; height: number } {
  const w = Number(input.width);
  const h = Number(input.height);
  if (Number.isInteger(w) && Number.isInteger(h) && w >= 16 && h >= 16 && w * h <= MAX_PIXELS) return { width: w, height: h };
  const side = ({ '1K': 1024, '2K': 2048, '4K': 4096 } as Record<string, number>)[String(input.resolution)] ?? 1024;
  const m = /^(\d+):(\d+)$/.exec(scalar(input.aspect_ratio, '1:1'));
  const rw = m ? Number(m[1]) : 1;
  const rh = m ? Number(m[2]) : 1;
  const other = Math.max(16, Math.round((side * Math.min(rw, rh)) / Math.max(rw, rh)));
  return rw >= rh ? { width: side, height: other } : { width: other, height: side };
}

const isVideo = (p: Prediction) => typeof p.input.duration === 'number';

/** The MP4 of a video prediction: `duration` seconds (3/4 with [sim:short]) at the resolution and ratio asked. */
function videoOf(p: Prediction): Buffer {
  const prompt = String(p.input.prompt);
  const seconds = Number(p.input.duration) * (videoDirectives(prompt).short ? 0.75 : 1);
  const short = parseInt(scalar(p.input.resolution, '720'), 10) || 720;
  const m = /^(\d+):(\d+)$/.exec(scalar(p.input.aspect_ratio, '16:9'));
  const [rw, rh] = m ? [Number(m[1]), Number(m[2])] : [16, 9];
  const long = Math.round((short * Math.max(rw, rh)) / Math.min(rw, rh) / 2) * 2;
  const [width, height] = rw >= rh ? [long, short] : [short, long];
  return mp4Buffer({ durationMs: seconds * 1000, width, height, mediaBytes: 4096, seed: seedOf(prompt) });
}

function view(sim: SimContext, p: Prediction) {
  const now = Date.now();
  let status: string;
  let error: string | null = null;
  if (p.canceledAt !== undefined) status = 'canceled';
  else if (now < p.readyAt) status = now < p.createdAt + (p.readyAt - p.createdAt) / 2 ? 'starting' : 'processing';
  else if (p.fail) {
    status = 'failed';
    error = 'The model failed to produce an image (simulated).';
  } else if (isVideo(p) && videoDirectives(String(p.input.prompt)).blocked) {
    status = 'failed';
    error = 'The input or output was flagged as sensitive. Please try again with different inputs. (E005) (simulated)';
  } else {
    status = 'succeeded';
    if (!p.output && isVideo(p)) p.output = publishFile(sim, `${p.id}.mp4`, videoOf(p), 'video/mp4');
    if (!p.output) {
      const n = Math.min(4, Math.max(1, Number(p.input.num_outputs ?? 1) || 1));
      const size = sizeOf(p.input);
      p.output = Array.from({ length: n }, (_, i) =>
        publishFile(sim, `${p.id}-${i}.png`, encodePng(size.width, size.height, seedOf(`${String(p.input.prompt)}#${i}`))),
      );
    }
  }
  const done = status === 'succeeded' || status === 'failed' || status === 'canceled';
  return {
    id: p.id,
    model: p.model,
    version: p.version,
    input: p.input,
    logs: '',
    output: status === 'succeeded' ? p.output : null,
    error,
    status,
    created_at: new Date(p.createdAt).toISOString(),
    ...(done ? { completed_at: new Date(p.canceledAt ?? p.readyAt).toISOString(), metrics: { predict_time: (p.readyAt - p.createdAt) / 1000 } } : {}),
    urls: { get: `${sim.url}/v1/predictions/${p.id}`, cancel: `${sim.url}/v1/predictions/${p.id}/cancel` },
  };
}

function create(r: SimRequest, model: string, version: string | null): void {
  const input = r.json?.input as Record<string, unknown> | undefined;
  if (!input || typeof input !== 'object') return problem(r, 422, 'Invalid input', 'input is required');
  if (typeof input.prompt !== 'string' || input.prompt === '') return problem(r, 422, 'Input validation failed', 'input.prompt is required');
  const d = parseDirectives(input.prompt);
  if (d.status === 429)
    return problem(r, 429, 'Request was throttled', 'Request was throttled (simulated). Expected available in 1 second.', { 'retry-after': '1' });
  if (d.status === 500) return problem(r, 500, 'Internal server error', 'simulated');
  const now = Date.now();
  const p: Prediction = { id: simId('sim'), model, version, input, createdAt: now, readyAt: now + BASE_RUN_MS + r.sim.latencyMs + d.slowMs, fail: d.fail };
  const m = predictionsOf(r.sim);
  m.set(p.id, p);
  if (m.size > MAX_PREDICTIONS) m.delete(m.keys().next().value!);
  sendJson(r, 201, view(r.sim, p));
}

function find(r: SimRequest): Prediction | undefined {
  const p = predictionsOf(r.sim).get(r.params.id ?? '');
  if (!p) problem(r, 404, 'Not found', 'The requested resource could not be found.');
  return p;
}

export const replicateRoutes: SimRoute[] = [
  {
    method: 'POST',
    path: '/v1/predictions',
    handler: (r) => {
      const version = typeof r.json?.version === 'string' ? r.json.version : null;
      if (!version) return problem(r, 422, 'Invalid version', 'version is required');
      create(r, version.split(':')[0]!, version);
    },
  },
  { method: 'POST', path: '/v1/models/:owner/:name/predictions', handler: (r) => create(r, `${r.params.owner}/${r.params.name}`, null) },
  {
    method: 'GET',
    path: '/v1/predictions/:id',
    handler: (r) => {
      const p = find(r);
      if (p && String(p.input.prompt).includes('[sim:poll500]')) return problem(r, 500, 'Internal server error', 'prediction status unavailable (simulated)');
      if (p) sendJson(r, 200, view(r.sim, p));
    },
  },
  {
    method: 'POST',
    path: '/v1/predictions/:id/cancel',
    handler: (r) => {
      const p = find(r);
      if (!p) return;
      if (p.canceledAt === undefined && Date.now() < p.readyAt) p.canceledAt = Date.now();
      sendJson(r, 200, view(r.sim, p));
    },
  },
];

/** An input field as text, or the default when absent or not a scalar. */
function scalar(v: unknown, dflt: string): string {
  return typeof v === 'string' || typeof v === 'number' ? String(v) : dflt;
}
