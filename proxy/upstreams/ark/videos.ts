import { ProviderError, type ProviderContext, type ProviderOutcome, type TaskProvider, type VideoJob } from '../task-provider.js';
import { callProvider, openUrl, type ProviderResponse } from '../task-http.js';
import { arkAuth, arkError, nearest, SENSITIVE } from './common.js';

/**
 * Seedance video tasks on ModelArk: POST /contents/generations/tasks with model, content (the
 * prompt as text, then image_url items with role first_frame, last_frame or reference_image,
 * URLs that Ark fetches itself) and the parameters as body fields (resolution, ratio, duration,
 * generate_audio for the models that make sound, watermark off); GET .../tasks/{id} reports
 * queued, running, succeeded (content.video_url), failed (error), cancelled or expired; DELETE
 * .../tasks/{id} cancels a queued one. Seedance takes no reference video, and reference images
 * only without frames: those are ignored. A refused prompt is a 400 at creation (the gateway's
 * 400); a refused output fails the task. The duration billed is the MP4's.
 */
export const arkVideos: TaskProvider<VideoJob> = {
  name: 'ark',
  supports: (kind) => kind === 'video',
  ignores: (job) => [
    ...(job.referenceVideoUrl ? ['reference_video_url'] : []),
    ...(job.referenceImageUrls.length > 0 && (job.firstFrameUrl || job.lastFrameUrl) ? ['reference_image_urls'] : []),
    ...(job.negativePrompt ? ['negative_prompt'] : []),
  ],

  async submit(job, ctx) {
    const model = ctx.backend.model;
    const content: Record<string, unknown>[] = [{ type: 'text', text: job.prompt }];
    const image = (url: string, role: string) => content.push({ type: 'image_url', image_url: { url }, role });
    if (job.firstFrameUrl) image(job.firstFrameUrl, 'first_frame');
    if (job.lastFrameUrl) image(job.lastFrameUrl, 'last_frame');
    if (!job.firstFrameUrl && !job.lastFrameUrl) for (const u of job.referenceImageUrls.slice(0, 4)) image(u, 'reference_image');
    const body = {
      model,
      content,
      resolution: job.resolution,
      ratio: nearest(job.aspectRatio, RATIOS),
      duration: job.duration,
      ...(SOUND.test(model) ? { generate_audio: job.generateAudio } : {}),
      watermark: false,
    };
    const r = await callProvider(ctx, {
      method: 'POST',
      path: '/contents/generations/tasks',
      headers: { ...arkAuth(ctx), 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(body)),
      signal: ctx.signal,
    });
    if (r.status >= 400) {
      const err = arkError(r);
      // A refused prompt or input image: the gateway answers it as the contract's safety 400.
      if (err instanceof ProviderError && !err.retryable && SENSITIVE.test(err.code))
        throw new ProviderError(false, 'content_blocked', `${err.message} (${err.code})`);
      throw err;
    }
    const id = (r.json as { id?: unknown } | undefined)?.id;
    if (typeof id !== 'string' || id === '')
      return { state: 'failed', code: 'upstream_invalid_response', message: 'the upstream created a task without an id' };
    return { state: 'pending', upstreamId: id };
  },

  async poll(id, _data, ctx) {
    const r = await callProvider(ctx, {
      method: 'GET',
      path: `/contents/generations/tasks/${encodeURIComponent(id)}`,
      headers: arkAuth(ctx),
      signal: ctx.signal,
    });
    if (r.status >= 400) throw arkError(r);
    return outcomeOf(r, id);
  },

  async cancel(id, _data, ctx) {
    const r = await callProvider(ctx, {
      method: 'DELETE',
      path: `/contents/generations/tasks/${encodeURIComponent(id)}`,
      headers: arkAuth(ctx),
      signal: ctx.signal,
    });
    // A running task cannot be cancelled upstream (4xx): nothing more to do.
    if (r.status === 429 || r.status >= 500) throw arkError(r);
  },

  open: (output, ctx: ProviderContext) => openUrl(ctx, output.url, ctx.signal),
};

/** The ratios Seedance takes. */
const RATIOS = ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9'];
/** Seedance models that generate audio. */
const SOUND = /seedance-1-5|seedance-2/;

interface ArkTask {
  id?: string;
  status?: string;
  content?: { video_url?: string };
  error?: { code?: string; message?: string } | null;
}

function outcomeOf(r: ProviderResponse, id: string): ProviderOutcome {
  const t = r.json as ArkTask | undefined;
  switch (t?.status) {
    case 'queued':
    case 'running':
      return { state: 'pending', upstreamId: id };
    case 'succeeded':
      if (typeof t.content?.video_url !== 'string') return { state: 'failed', code: 'no_output', message: 'the upstream task succeeded without a video' };
      return { state: 'succeeded', outputs: [{ type: 'url', url: t.content.video_url }], usage: {} };
    case 'failed':
      return { state: 'failed', code: t.error?.code || 'upstream_failed', message: `the upstream video failed: ${t.error?.message ?? 'no reason given'}` };
    case 'cancelled':
    case 'expired':
      return { state: 'failed', code: `upstream_${t.status}`, message: `the upstream task was ${t.status}` };
    default:
      return { state: 'failed', code: 'upstream_invalid_response', message: `the upstream reported a task in an unknown state "${String(t?.status)}"` };
  }
}
