import type { ProviderContext, ProviderOutcome, TaskProvider, VideoJob } from '../task-provider.js';
import { blockedCode, callProvider, openUrl, statusError, type ProviderResponse } from '../task-http.js';

/**
 * OpenAI's videos API (https://platform.openai.com/docs/api-reference/videos), asynchronous:
 * POST /videos creates a job (JSON: model, prompt, seconds, size and input_reference.image_url
 * for a first frame), GET /videos/{id} reports queued / in_progress / completed / failed, and
 * GET /videos/{id}/content streams the MP4. The API has no last frame, reference images or
 * reference video: those are listed as ignored. It has no audio switch either (audio is charged
 * only where the route declares it and the client left it on) and no cancel.
 */
export const openaiVideos: TaskProvider<VideoJob> = {
  name: 'openai',
  supports: (kind) => kind === 'video',
  ignores: (job) => [
    ...(job.lastFrameUrl ? ['last_image_url'] : []),
    ...(job.referenceImageUrls.length > 0 ? ['reference_image_urls'] : []),
    ...(job.referenceVideoUrl ? ['reference_video_url'] : []),
    ...(job.negativePrompt ? ['negative_prompt'] : []),
  ],

  async submit(job, ctx) {
    const model = ctx.backend.model;
    const body = {
      model,
      prompt: job.prompt,
      seconds: String(openaiSeconds(model, job.duration)),
      size: openaiVideoSize(model, job.resolution, job.aspectRatio),
      ...(job.firstFrameUrl ? { input_reference: { image_url: job.firstFrameUrl } } : {}),
    };
    const r = await callProvider(ctx, {
      method: 'POST',
      path: '/videos',
      headers: { ...auth(ctx), 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(body)),
      signal: ctx.signal,
    });
    return outcomeOf(r, ctx, true);
  },

  async poll(upstreamId, _data, ctx) {
    const r = await callProvider(ctx, { method: 'GET', path: `/videos/${encodeURIComponent(upstreamId)}`, headers: auth(ctx), signal: ctx.signal });
    return outcomeOf(r, ctx, false);
  },

  open: (output, ctx) => openUrl(ctx, output.url, ctx.signal, auth(ctx)),
};

const auth = (ctx: ProviderContext): Record<string, string> => (ctx.credential ? { authorization: `Bearer ${ctx.credential}` } : {});

interface Video {
  id?: string;
  status?: 'queued' | 'in_progress' | 'completed' | 'failed';
  seconds?: string | number;
  error?: { code?: string; message?: string } | null;
}

function outcomeOf(r: ProviderResponse, ctx: ProviderContext, created: boolean): ProviderOutcome {
  if (r.status >= 400) {
    const e = (r.json as { error?: { message?: string; code?: string | null } } | undefined)?.error;
    throw statusError(r, e?.message, e?.code ?? undefined);
  }
  const v = r.json as Video;
  if (!v?.id) return { state: 'failed', code: 'upstream_invalid_response', message: 'the upstream answered without a video id' };
  switch (v.status) {
    case 'queued':
    case 'in_progress':
      return { state: 'pending', upstreamId: v.id };
    case 'completed': {
      // Created already complete: still poll once, so the content is fetched by the worker.
      if (created) return { state: 'pending', upstreamId: v.id };
      const seconds = Number(v.seconds);
      return {
        state: 'succeeded',
        outputs: [{ type: 'url', url: `${ctx.backend.baseURL.replace(/\/+$/, '')}/videos/${encodeURIComponent(v.id)}/content` }],
        usage: Number.isFinite(seconds) && seconds > 0 ? { seconds } : {},
      };
    }
    case 'failed':
      return {
        state: 'failed',
        code: blockedCode(v.error?.code ?? undefined) ?? (v.error?.code || 'upstream_failed'),
        message: `the upstream video failed: ${v.error?.message ?? 'no reason given'}`,
      };
    default:
      return { state: 'failed', code: 'upstream_invalid_response', message: `the upstream reported a video in an unknown state "${String(v.status)}"` };
  }
}

/** Durations Sora takes. */
const SORA_SECONDS = [4, 8, 12];

/**
 * The seconds sent upstream. Sora takes 4, 8 or 12: the longest of those not above the asked
 * duration, so the client never pays for more than asked (the shorter actual duration is what
 * is charged). Any other model behind this protocol gets the duration as asked.
 */
export function openaiSeconds(model: string, duration: number): number {
  if (!model.startsWith('sora')) return duration;
  return SORA_SECONDS.filter((s) => s <= duration).pop() ?? SORA_SECONDS[0]!;
}

/**
 * The size sent upstream. Sora takes 720x1280 and 1280x720 (sora-2-pro also 1024x1792 and
 * 1792x1024, for 1080p and above): the orientation of the ratio at that tier. Other models
 * get the ratio at the resolution's height on the short side, in even pixels.
 */
export function openaiVideoSize(model: string, resolution: string, aspectRatio: string): string {
  const [w, h] = aspectRatio.split(':').map(Number) as [number, number];
  const portrait = h > w;
  if (model.startsWith('sora')) {
    const large = model.startsWith('sora-2-pro') && parseInt(resolution, 10) >= 1080;
    const [long, short] = large ? [1792, 1024] : [1280, 720];
    return portrait ? `${short}x${long}` : `${long}x${short}`;
  }
  const short = parseInt(resolution, 10);
  const long = Math.round((short * Math.max(w, h)) / Math.min(w, h) / 2) * 2;
  return portrait ? `${short}x${long}` : `${long}x${short}`;
}
