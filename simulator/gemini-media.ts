import { parseDirectives } from './directives.js';
import { encodePng, pngSize, seedOf } from './png.js';
import type { SimRequest, SimRoute } from './server.js';
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
 * Auth: x-goog-api-key (Gemini API) or Authorization: Bearer (Vertex), else 401/403 as Google answers.
 */

const googleError = (r: SimRequest, code: number, status: string, message: string, headers: Record<string, string> = {}) =>
  sendJson(r, code, { error: { code, message, status } }, headers);

const SIDE: Record<string, number> = { '1K': 1024, '2K': 2048, '4K': 4096 };

interface Part {
  text?: string;
  inlineData?: { mimeType?: string; data?: string };
}

function authorized(r: SimRequest, vertex: boolean): boolean {
  if (vertex) {
    if (/^Bearer \S+$/.test(r.req.headers.authorization ?? '')) return true;
    googleError(r, 401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials. Expected OAuth 2 access token.');
    return false;
  }
  if (r.req.headers['x-goog-api-key']) return true;
  googleError(
    r,
    403,
    'PERMISSION_DENIED',
    "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
  );
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
  googleError(r, 404, 'NOT_FOUND', `simulator: no method "${method}" on models/${model}`);
}

export const geminiMediaRoutes: SimRoute[] = [
  { method: 'POST', path: '/gmedia/v1beta/models/:action', handler: (r) => dispatch(r, false) },
  { method: 'POST', path: '/gmedia/v1/projects/:project/locations/:location/publishers/google/models/:action', handler: (r) => dispatch(r, true) },
];
