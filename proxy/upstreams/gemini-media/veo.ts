import type { ProviderContext, ProviderOutcome, ProviderOutput, TaskProvider, VideoJob } from '../task-provider.js';
import { callProvider, openUrl, type ProviderResponse } from '../task-http.js';
import { authOf, dialectOf, googleError, inline, modelPath, versionPrefix } from './endpoint.js';

/**
 * Veo (veo-2.0, veo-3.0, veo-3.1) on the Gemini API and Vertex AI: POST
 * models/{model}:predictLongRunning with one instance (prompt, first frame `image`, `lastFrame`,
 * `referenceImages` as assets, each inline base64) and parameters (aspectRatio, durationSeconds,
 * resolution, negativePrompt; generateAudio on Vertex only: the Gemini API refuses the field and
 * its Veo 3 models always make sound). The answer is a long-running operation, polled by GET of
 * its name (Gemini API) or models/{model}:fetchPredictOperation (Vertex). The Gemini API hands the
 * video out as a file URI (fetched with the key, following its redirect); Vertex inline. The
 * duration billed is the one the MP4 says (Veo reports none). Veo cannot take a reference
 * video, reference images beside a frame, or a last frame without a first: those are ignored.
 */
export const veo: TaskProvider<VideoJob> = {
  name: 'gemini',
  supports: (kind) => kind === 'video',
  ignores: (job) => [
    ...(job.referenceVideoUrl ? ['reference_video_url'] : []),
    ...(job.lastFrameUrl && !job.firstFrameUrl ? ['last_image_url'] : []),
    ...(job.referenceImageUrls.length > 0 && job.firstFrameUrl ? ['reference_image_urls'] : []),
  ],

  async submit(job, ctx) {
    const r = await callProvider(ctx, {
      method: 'POST',
      path: modelPath(ctx.backend, 'predictLongRunning'),
      headers: { ...(await authOf(ctx)), 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(await requestOf(job, ctx))),
      signal: ctx.signal,
    });
    if (r.status >= 400) throw googleError(r);
    const name = (r.json as { name?: unknown } | undefined)?.name;
    if (typeof name !== 'string' || !OPERATION.test(name))
      return { state: 'failed', code: 'upstream_invalid_response', message: 'the upstream started an operation without a usable name' };
    return { state: 'pending', upstreamId: name };
  },

  async poll(name, _data, ctx) {
    if (!OPERATION.test(name)) return { state: 'failed', code: 'upstream_invalid_response', message: 'the recorded operation name is not one Veo gives' };
    const r =
      dialectOf(ctx.backend) === 'vertex'
        ? await callProvider(ctx, {
            method: 'POST',
            path: modelPath(ctx.backend, 'fetchPredictOperation'),
            headers: { ...(await authOf(ctx)), 'content-type': 'application/json' },
            body: Buffer.from(JSON.stringify({ operationName: name })),
            signal: ctx.signal,
          })
        : await callProvider(ctx, { method: 'GET', path: `${versionPrefix(ctx.backend)}/${name}`, headers: await authOf(ctx), signal: ctx.signal });
    if (r.status >= 400) throw googleError(r);
    return outcomeOf(r, name);
  },

  // A Gemini file URI wants the key on the API's own origin, then redirects to the bytes' storage host.
  open: async (output, ctx) => openUrl(ctx, output.url, ctx.signal, await authOf(ctx)),
};

/** Operation names as both APIs give them: path segments of word characters, dots and dashes. */
const OPERATION = /^[\w.-]+(\/[\w.-]+)*\/operations\/[\w.-]+$/;

/** Durations each Veo generation takes. */
export function veoDurations(model: string): number[] {
  return /veo-2/.test(model) ? [5, 6, 7, 8] : [4, 6, 8];
}

/** The longest duration the model takes not above the asked one (else its shortest): never more than the client pays for. */
export function veoDuration(model: string, asked: number): number {
  const d = veoDurations(model);
  return d.filter((x) => x <= asked).pop() ?? d[0]!;
}

async function requestOf(job: VideoJob, ctx: ProviderContext): Promise<Record<string, unknown>> {
  const vertex = dialectOf(ctx.backend) === 'vertex';
  const image = async (url: string, field: string) => {
    const m = await inline(await ctx.fetchMedia(url, field));
    return { bytesBase64Encoded: m.data, mimeType: m.mimeType };
  };
  const instance: Record<string, unknown> = { prompt: job.prompt };
  if (job.firstFrameUrl) {
    instance.image = await image(job.firstFrameUrl, 'image_url');
    if (job.lastFrameUrl) instance.lastFrame = await image(job.lastFrameUrl, 'last_image_url');
  } else if (job.referenceImageUrls.length > 0) {
    const refs = [];
    for (let i = 0; i < Math.min(3, job.referenceImageUrls.length); i++)
      refs.push({ image: await image(job.referenceImageUrls[i]!, `reference_image_urls[${i}]`), referenceType: 'asset' });
    instance.referenceImages = refs;
  }
  const [w, h] = job.aspectRatio.split(':').map(Number) as [number, number];
  return {
    instances: [instance],
    parameters: {
      aspectRatio: h > w ? '9:16' : '16:9',
      durationSeconds: veoDuration(ctx.backend.model, job.duration),
      resolution: job.resolution,
      ...(job.negativePrompt ? { negativePrompt: job.negativePrompt } : {}),
      ...(vertex ? { generateAudio: job.generateAudio, sampleCount: 1 } : {}),
    },
  };
}

interface Operation {
  name?: string;
  done?: boolean;
  error?: { code?: number; message?: string };
  response?: {
    generateVideoResponse?: { generatedSamples?: { video?: { uri?: string } }[]; raiMediaFilteredCount?: number; raiMediaFilteredReasons?: string[] };
    videos?: { bytesBase64Encoded?: string; gcsUri?: string; mimeType?: string }[];
    raiMediaFilteredCount?: number;
    raiMediaFilteredReasons?: string[];
  };
}

function outcomeOf(r: ProviderResponse, name: string): ProviderOutcome {
  const op = r.json as Operation | undefined;
  if (!op?.done) return { state: 'pending', upstreamId: name };
  if (op.error)
    return { state: 'failed', code: 'upstream_failed', message: `the upstream video failed: ${op.error.message ?? `error ${op.error.code ?? ''}`}` };
  const res = op.response ?? {};
  const g = res.generateVideoResponse;
  const outputs: ProviderOutput[] = [];
  for (const s of g?.generatedSamples ?? []) if (typeof s.video?.uri === 'string') outputs.push({ type: 'url', url: s.video.uri });
  for (const v of res.videos ?? []) {
    if (v.bytesBase64Encoded) outputs.push({ type: 'bytes', data: Buffer.from(v.bytesBase64Encoded, 'base64'), contentType: v.mimeType ?? 'video/mp4' });
  }
  if (outputs.length > 0) return { state: 'succeeded', outputs: outputs.slice(0, 1), usage: {} };
  const filtered = g?.raiMediaFilteredCount ?? res.raiMediaFilteredCount ?? 0;
  const reasons = g?.raiMediaFilteredReasons ?? res.raiMediaFilteredReasons ?? [];
  if (filtered > 0 || reasons.length > 0)
    return {
      state: 'failed',
      code: 'content_blocked',
      message: `the upstream's safety filter removed the video${reasons.length ? `: ${reasons.join('; ')}` : ''}`,
    };
  if ((res.videos ?? []).some((v) => v.gcsUri))
    return { state: 'failed', code: 'upstream_invalid_response', message: 'the upstream wrote the video to Cloud Storage; leave storageUri unset' };
  return { state: 'failed', code: 'no_output', message: 'the upstream operation finished without a video' };
}
