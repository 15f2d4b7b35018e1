import type { CompiledBackend } from '../../../api/snapshot/index.js';
import type { ImageJob, ProviderContext, ProviderOutcome, ProviderOutput, TaskJob, TaskProvider, VideoJob } from '../task-provider.js';
import { blockedCode, callProvider, openUrl, statusError, type ProviderResponse } from '../task-http.js';

/**
 * Replicate's predictions API (https://api.replicate.com/v1): create, poll, cancel. The
 * backend's model is "owner/name" (the model's latest version) or "owner/name:version" or a
 * bare version id. Image inputs follow the common image-model schema: prompt, negative_prompt,
 * num_outputs, aspect_ratio, width/height (when the client gave pixels), resolution, quality,
 * image (first input), image_input (all inputs, when several), mask. Video inputs follow the
 * common video-model schema (Veo, Seedance, Kling on Replicate): prompt, duration, resolution,
 * aspect_ratio, generate_audio, image (first frame), last_frame, reference_images, video
 * (reference video). Replicate fetches input URLs itself, so nothing is downloaded here.
 */
export const replicate: TaskProvider = {
  name: 'replicate',
  supports: (kind) => kind === 'image' || kind === 'video',

  async submit(job, ctx) {
    const { path, version } = createPath(ctx.backend.model);
    const body = { ...(version ? { version } : {}), input: inputOf(job) };
    const r = await callProvider(ctx, {
      method: 'POST',
      path,
      headers: { ...auth(ctx), 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(body)),
      signal: ctx.signal,
    });
    return outcomeOf(r, true, job.kind);
  },

  async poll(upstreamId, data, ctx) {
    const r = await callProvider(ctx, {
      method: 'GET',
      path: `/predictions/${encodeURIComponent(upstreamId)}`,
      headers: auth(ctx),
      signal: ctx.signal,
    });
    return outcomeOf(r, false, data?.kind === 'video' ? 'video' : 'image');
  },

  async cancel(upstreamId, _data, ctx) {
    const r = await callProvider(ctx, {
      method: 'POST',
      path: `/predictions/${encodeURIComponent(upstreamId)}/cancel`,
      headers: auth(ctx),
      signal: ctx.signal,
    });
    if (r.status >= 400) throw statusError(r, errorText(r.json), undefined);
  },

  open: (output, ctx) => openUrl(ctx, output.url, ctx.signal, auth(ctx)),
};

const auth = (ctx: ProviderContext): Record<string, string> => (ctx.credential ? { authorization: `Bearer ${ctx.credential}` } : {});

function createPath(model: CompiledBackend['model']): { path: string; version?: string } {
  const colon = model.indexOf(':');
  if (colon !== -1) return { path: '/predictions', version: model.slice(colon + 1) };
  if (/^[0-9a-f]{64}$/.test(model)) return { path: '/predictions', version: model };
  const [owner, name] = model.split('/');
  return { path: `/models/${encodeURIComponent(owner ?? '')}/${encodeURIComponent(name ?? '')}/predictions` };
}

function inputOf(job: TaskJob): Record<string, unknown> {
  if (job.kind === 'video') return videoInputOf(job);
  const j: ImageJob = job;
  return {
    prompt: j.prompt,
    ...(j.negativePrompt ? { negative_prompt: j.negativePrompt } : {}),
    num_outputs: j.n,
    aspect_ratio: j.aspectRatio,
    ...(j.sizeFrom === 'pixels' ? { width: j.width, height: j.height } : {}),
    resolution: j.resolution,
    ...(j.quality ? { quality: j.quality } : {}),
    ...(j.imageUrls.length > 0 ? { image: j.imageUrls[0] } : {}),
    ...(j.imageUrls.length > 1 ? { image_input: j.imageUrls } : {}),
    ...(j.maskUrl ? { mask: j.maskUrl } : {}),
  };
}

function videoInputOf(j: VideoJob): Record<string, unknown> {
  return {
    prompt: j.prompt,
    duration: j.duration,
    resolution: j.resolution,
    aspect_ratio: j.aspectRatio,
    generate_audio: j.generateAudio,
    ...(j.negativePrompt ? { negative_prompt: j.negativePrompt } : {}),
    ...(j.firstFrameUrl ? { image: j.firstFrameUrl } : {}),
    ...(j.lastFrameUrl ? { last_frame: j.lastFrameUrl } : {}),
    ...(j.referenceImageUrls.length > 0 ? { reference_images: j.referenceImageUrls } : {}),
    ...(j.referenceVideoUrl ? { video: j.referenceVideoUrl } : {}),
  };
}

interface Prediction {
  id?: string;
  status?: 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';
  output?: unknown;
  error?: unknown;
  metrics?: Record<string, unknown>;
}

function errorText(json: unknown): string | undefined {
  const j = json as { detail?: unknown; title?: unknown; error?: unknown } | undefined;
  const v = j?.detail ?? j?.error ?? j?.title;
  return typeof v === 'string' ? v : v === undefined ? undefined : JSON.stringify(v);
}

/** `kind` is remembered with the pending prediction: a video's usage is its duration, read from the file by the engine. */
function outcomeOf(r: ProviderResponse, created: boolean, kind: TaskJob['kind']): ProviderOutcome {
  if (r.status >= 400) throw statusError(r, errorText(r.json), undefined);
  const p = r.json as Prediction;
  switch (p.status) {
    case 'starting':
    case 'processing':
      if (!p.id) return { state: 'failed', code: 'upstream_invalid_response', message: 'the upstream created a prediction without an id' };
      return { state: 'pending', upstreamId: p.id, ...(kind === 'video' ? { data: { kind } } : {}) };
    case 'succeeded': {
      const urls = (Array.isArray(p.output) ? p.output : [p.output]).filter((u): u is string => typeof u === 'string');
      if (urls.length === 0) return { state: 'failed', code: 'no_output', message: 'the upstream prediction succeeded without output' };
      const outputs: ProviderOutput[] = urls.map((url) => ({ type: 'url', url }));
      const predictTime = Number(p.metrics?.predict_time);
      const time: Record<string, number> = Number.isFinite(predictTime) ? { predictSeconds: predictTime } : {};
      return { state: 'succeeded', outputs, usage: kind === 'video' ? time : { images: urls.length, ...time } };
    }
    case 'failed': {
      const reason = typeof p.error === 'string' ? p.error : JSON.stringify(p.error ?? 'no reason given');
      // Replicate reports a safety refusal only as the failed prediction's error (E005, "flagged as sensitive").
      return { state: 'failed', code: blockedCode(reason) ?? 'upstream_failed', message: `the upstream prediction failed: ${reason}` };
    }
    case 'canceled':
    case 'aborted':
      return { state: 'failed', code: 'upstream_cancelled', message: `the upstream prediction was ${p.status}` };
    default:
      return {
        state: 'failed',
        code: 'upstream_invalid_response',
        message: `the upstream ${created ? 'created' : 'reported'} a prediction in an unknown state "${String(p.status)}"`,
      };
  }
}
