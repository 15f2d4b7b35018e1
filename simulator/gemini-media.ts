import { randomBytes } from 'node:crypto';
import { parseDirectives } from './directives.js';
import { publishFile } from './files.js';
import { mp4Buffer } from './mp4.js';
import { videoDirectives } from './openai-videos.js';
import { encodePng, pngSize, seedOf } from './png.js';
import type { SimContext, SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';

/**
 * Google's media models under /gmedia (apart from the Gemini chat routes; the real bases are
 * https://generativelanguage.googleapis.com and https://{region}-aiplatform.googleapis.com):
 *   POST /gmedia/v1beta/models/{model}:generateContent                                  Gemini API
 *   POST /gmedia/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent   Vertex AI
 * Image models answer `responseModalities: ["IMAGE"]` with one inline PNG per call, sized by
 * imageConfig (imageSize 1K/2K/4K on the longer side, aspectRatio); with an input image and no
 * imageConfig, the input's size. Directives in the prompt text: [sim:blocked] finishes with
 * IMAGE_SAFETY and no image; [sim:fail] answers text only (finishReason NO_IMAGE);
 * [sim:429] RESOURCE_EXHAUSTED; [sim:500] INTERNAL; [sim:slow=MS] delays the answer.
 * Veo models (a model name starting "veo") answer :predictLongRunning with an operation that is
 * done after 100 ms + the simulator's latency + [sim:slow=MS]; it is polled by
 * GET /gmedia/v1beta/{operation name} (Gemini API: the video is a file URI,
 * GET /gmedia/v1beta/files/{id}:download?alt=media with the key, which redirects to the bytes) or
 * POST models/{model}:fetchPredictOperation (Vertex: the video inline, base64). The MP4 lasts
 * durationSeconds (3/4 of it with [sim:short]). Checked as Veo does: durationSeconds 4/6/8
 * (veo-2: 5-8), aspectRatio 16:9 or 9:16, resolution 720p or 1080p, referenceImages not beside
 * an image, lastFrame only with an image, generateAudio refused on the Gemini API. [sim:blocked]
 * finishes with raiMediaFilteredReasons and no video; [sim:fail] with an operation error.
 * Auth: x-goog-api-key (Gemini API) or Authorization: Bearer (Vertex); the wrong kind is a 401, none at all
 * passes (the quickstart has no keys).
 */

const googleError = (r: SimRequest, code: number, status: string, message: string, headers: Record<string, string> = {}) =>
  sendJson(r, code, { error: { code, message, status } }, headers);

const SIDE: Record<string, number> = { '1K': 1024, '2K': 2048, '4K': 4096 };

interface Part {
  text?: string;
  inlineData?: { mimeType?: string; data?: string };
}

/** No credential at all passes (the quickstart's routes carry none); a credential of the wrong kind is refused as Google does. */
function authorized(r: SimRequest, vertex: boolean): boolean {
  const bearer = r.req.headers.authorization;
  const key = r.req.headers['x-goog-api-key'];
  if (bearer === undefined && key === undefined) return true;
  if (vertex) {
    if (/^Bearer \S+$/.test(bearer ?? '')) return true;
    googleError(r, 401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials. Expected OAuth 2 access token.');
    return false;
  }
  if (key) return true;
  googleError(r, 401, 'UNAUTHENTICATED', 'API keys are passed in the x-goog-api-key header; an OAuth token was given instead.');
  return false;
}

async function generateContent(r: SimRequest, model: string): Promise<void> {
  const contents = r.json?.contents as { role?: string; parts?: Part[] }[] | undefined;
  const parts = (contents ?? []).flatMap((c) => c.parts ?? []);
  const prompt = parts.map((p) => p.text ?? '').join(' ');
  if (!prompt.trim()) return googleError(r, 400, 'INVALID_ARGUMENT', '* GenerateContentRequest.contents: contents is not specified');
  const config = (r.json?.generationConfig ?? {}) as { responseModalities?: string[]; imageConfig?: { aspectRatio?: string; imageSize?: string } };
  if (!config.responseModalities?.some((m) => m.toUpperCase() === 'IMAGE'))
    return googleError(r, 400, 'INVALID_ARGUMENT', `simulator: ${model} answers images only; set generationConfig.responseModalities to ["IMAGE"]`);
  const size = config.imageConfig?.imageSize;
  if (size !== undefined && !(size in SIDE))
    return googleError(r, 400, 'INVALID_ARGUMENT', `* GenerateContentRequest.generation_config.image_config.image_size: unsupported value "${size}"`);
  const d = parseDirectives(prompt);
  if (d.status === 429) return googleError(r, 429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota). (simulated)', { 'retry-after': '1' });
  if (d.status === 500) return googleError(r, 500, 'INTERNAL', 'An internal error has occurred. (simulated)');
  await new Promise((res) => setTimeout(res, r.sim.latencyMs + d.slowMs));
  const usageMetadata = { promptTokenCount: Math.ceil(prompt.length / 4), candidatesTokenCount: 1290, totalTokenCount: Math.ceil(prompt.length / 4) + 1290 };
  if (prompt.includes('[sim:blocked]'))
    return sendJson(r, 200, { candidates: [{ finishReason: 'IMAGE_SAFETY', index: 0 }], usageMetadata, modelVersion: model });
  if (d.fail)
    return sendJson(r, 200, {
      candidates: [{ content: { role: 'model', parts: [{ text: 'I could not make that image (simulated).' }] }, finishReason: 'NO_IMAGE', index: 0 }],
      usageMetadata,
      modelVersion: model,
    });
  const { width, height } = dimensions(config.imageConfig, parts);
  const png = encodePng(width, height, seedOf(prompt));
  sendJson(r, 200, {
    candidates: [
      { content: { role: 'model', parts: [{ inlineData: { mimeType: 'image/png', data: png.toString('base64') } }] }, finishReason: 'STOP', index: 0 },
    ],
    usageMetadata,
    modelVersion: model,
  });
}

/** The tier's side on the longer edge at the ratio asked; without imageConfig, the first input image's size, else 1024 square. */
function dimensions(cfg: { aspectRatio?: string; imageSize?: string } | undefined, parts: Part[]): { width: number; height: number } {
  if (!cfg?.aspectRatio && !cfg?.imageSize) {
    const input = parts.find((p) => p.inlineData?.data);
    const s = input ? pngSize(Buffer.from(input.inlineData!.data!, 'base64')) : undefined;
    if (s) return s;
  }
  const side = SIDE[cfg?.imageSize ?? '1K']!;
  const m = /^(\d+):(\d+)$/.exec(cfg?.aspectRatio ?? '1:1');
  const [w, h] = m ? [Number(m[1]), Number(m[2])] : [1, 1];
  const other = Math.round((side * Math.min(w, h)) / Math.max(w, h) / 8) * 8;
  return w >= h ? { width: side, height: other } : { width: other, height: side };
}

/** "{model}:{method}" of the last path segment. */
function dispatch(r: SimRequest, vertex: boolean): Promise<void> | void {
  if (!authorized(r, vertex)) return;
  const action = r.params.action ?? '';
  const colon = action.lastIndexOf(':');
  const model = action.slice(0, colon);
  const method = action.slice(colon + 1);
  if (colon > 0 && method === 'generateContent') return generateContent(r, model);
  if (colon > 0 && method === 'predictLongRunning' && model.startsWith('veo')) return predict(r, model, vertex);
  if (colon > 0 && method === 'fetchPredictOperation' && vertex) return fetchOperation(r);
  googleError(r, 404, 'NOT_FOUND', `simulator: no method "${method}" on models/${model}`);
}

interface VeoOperation {
  name: string;
  model: string;
  prompt: string;
  seconds: number;
  width: number;
  height: number;
  createdAt: number;
  readyAt: number;
  fail: boolean;
  blocked: boolean;
  vertex: boolean;
  file?: string;
}

const BASE_RUN_MS = 100;
const MAX_OPERATIONS = 1000;
const operations = new WeakMap<SimContext, Map<string, VeoOperation>>();
function operationsOf(sim: SimContext) {
  let m = operations.get(sim);
  if (!m) operations.set(sim, (m = new Map<string, VeoOperation>()));
  return m;
}

interface VeoImage {
  bytesBase64Encoded?: string;
  mimeType?: string;
}

function predict(r: SimRequest, model: string, vertex: boolean): void {
  const instance = (r.json?.instances as Record<string, unknown>[] | undefined)?.[0];
  const p = (r.json?.parameters ?? {}) as Record<string, unknown>;
  const bad = (message: string) => googleError(r, 400, 'INVALID_ARGUMENT', message);
  if (!instance || typeof instance.prompt !== 'string' || instance.prompt === '') return bad('* instances[0].prompt: a prompt is required');
  const image = (v: unknown) => v === undefined || (typeof (v as VeoImage).bytesBase64Encoded === 'string' && typeof (v as VeoImage).mimeType === 'string');
  if (!image(instance.image) || !image(instance.lastFrame)) return bad('image: bytesBase64Encoded and mimeType are required');
  const refs = instance.referenceImages as { image?: unknown; referenceType?: unknown }[] | undefined;
  if (refs !== undefined && (!Array.isArray(refs) || refs.length > 3 || refs.some((x) => !image(x.image) || x.referenceType !== 'asset')))
    return bad('referenceImages: up to 3 images with referenceType "asset"');
  if (refs && (instance.image || instance.lastFrame)) return bad('referenceImages cannot be combined with image or lastFrame');
  if (instance.lastFrame && !instance.image) return bad('lastFrame requires image');
  const allowed = model.startsWith('veo-2') ? [5, 6, 7, 8] : [4, 6, 8];
  const seconds = p.durationSeconds === undefined ? 8 : Number(p.durationSeconds);
  if (!allowed.includes(seconds)) return bad(`durationSeconds must be one of ${allowed.join(', ')}`);
  const ratio = String((p.aspectRatio as string | undefined) ?? '16:9');
  if (ratio !== '16:9' && ratio !== '9:16') return bad('aspectRatio must be 16:9 or 9:16');
  const resolution = String((p.resolution as string | undefined) ?? '720p');
  if (resolution !== '720p' && resolution !== '1080p') return bad('resolution must be 720p or 1080p');
  if (!vertex && p.generateAudio !== undefined) return bad('generateAudio parameter is not supported in Gemini API.');
  const d = parseDirectives(instance.prompt);
  if (d.status === 429) return googleError(r, 429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota). (simulated)', { 'retry-after': '1' });
  if (d.status === 500) return googleError(r, 500, 'INTERNAL', 'An internal error has occurred. (simulated)');
  const v = videoDirectives(instance.prompt);
  const short = resolution === '1080p' ? 1080 : 720;
  const long = Math.round((short * 16) / 9 / 2) * 2;
  const id = randomBytes(6).toString('hex');
  const prefix = vertex ? `projects/${r.params.project}/locations/${r.params.location}/publishers/google/models/${model}` : `models/${model}`;
  const now = Date.now();
  const op: VeoOperation = {
    name: `${prefix}/operations/${id}`,
    model,
    prompt: instance.prompt,
    seconds: v.short ? (seconds * 3) / 4 : seconds,
    ...(ratio === '16:9' ? { width: long, height: short } : { width: short, height: long }),
    createdAt: now,
    readyAt: now + BASE_RUN_MS + r.sim.latencyMs + d.slowMs,
    fail: d.fail,
    blocked: v.blocked,
    vertex,
  };
  const m = operationsOf(r.sim);
  m.set(op.name, op);
  if (m.size > MAX_OPERATIONS) m.delete(m.keys().next().value!);
  sendJson(r, 200, { name: op.name });
}

function mp4Of(op: VeoOperation): Buffer {
  return mp4Buffer({ durationMs: op.seconds * 1000, width: op.width, height: op.height, mediaBytes: 4096, seed: seedOf(op.prompt) });
}

function operationView(sim: SimContext, op: VeoOperation): Record<string, unknown> {
  if (Date.now() < op.readyAt)
    return { name: op.name, metadata: { '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningMetadata' } };
  if (op.fail) return { name: op.name, done: true, error: { code: 13, message: 'Video generation failed (simulated).' } };
  const reasons = ['The prompt could not be submitted: it may violate our policies (simulated).'];
  if (op.vertex) {
    const response = op.blocked
      ? { raiMediaFilteredCount: 1, raiMediaFilteredReasons: reasons }
      : { raiMediaFilteredCount: 0, videos: [{ bytesBase64Encoded: mp4Of(op).toString('base64'), mimeType: 'video/mp4' }] };
    return { name: op.name, done: true, response: { '@type': 'type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse', ...response } };
  }
  if (!op.blocked && !op.file) {
    op.file = randomBytes(6).toString('hex');
    publishFile(sim, `veo-${op.file}.mp4`, mp4Of(op), 'video/mp4');
  }
  const g = op.blocked
    ? { raiMediaFilteredCount: 1, raiMediaFilteredReasons: reasons }
    : { generatedSamples: [{ video: { uri: `${sim.url}/gmedia/v1beta/files/${op.file}:download?alt=media` } }] };
  return {
    name: op.name,
    done: true,
    response: { '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse', generateVideoResponse: g },
  };
}

function getOperation(r: SimRequest): void {
  if (!authorized(r, false)) return;
  const op = operationsOf(r.sim).get(`models/${r.params.model}/operations/${r.params.op}`);
  if (!op || op.vertex) return googleError(r, 404, 'NOT_FOUND', 'Operation not found.');
  sendJson(r, 200, operationView(r.sim, op));
}

function fetchOperation(r: SimRequest): void {
  const name = typeof r.json?.operationName === 'string' ? r.json.operationName : '';
  const op = operationsOf(r.sim).get(name);
  if (!op || !op.vertex) return googleError(r, 404, 'NOT_FOUND', `Operation ${name} not found.`);
  sendJson(r, 200, operationView(r.sim, op));
}

/** A file's download: the key is required here; the bytes are served elsewhere, as Google's redirect does. */
function download(r: SimRequest): void {
  if (!authorized(r, false)) return;
  const id = (r.params.action ?? '').replace(/:download$/, '');
  r.res.writeHead(302, { location: `${r.sim.url}/files/veo-${encodeURIComponent(id)}.mp4`, 'content-length': 0 });
  r.res.end();
}

export const geminiMediaRoutes: SimRoute[] = [
  { method: 'POST', path: '/gmedia/v1beta/models/:action', handler: (r) => dispatch(r, false) },
  { method: 'GET', path: '/gmedia/v1beta/models/:model/operations/:op', handler: getOperation },
  { method: 'GET', path: '/gmedia/v1beta/files/:action', handler: download },
  { method: 'POST', path: '/gmedia/v1/projects/:project/locations/:location/publishers/google/models/:action', handler: (r) => dispatch(r, true) },
];
