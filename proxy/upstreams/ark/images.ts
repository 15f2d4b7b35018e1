import type { ImageJob, ProviderOutput, TaskProvider } from '../task-provider.js';
import { ProviderError } from '../task-provider.js';
import { callProvider, openUrl } from '../task-http.js';
import { arkAuth, arkError, SENSITIVE } from './common.js';

/**
 * Seedream on ModelArk: POST /images/generations (synchronous) with model, prompt, size (pixels
 * "WxH"), `image` (the reference image URLs, which Ark fetches itself), response_format url and
 * watermark off. One call makes one image (sequential generation disabled): n images are n
 * calls. Seedream has no mask or negative prompt: both are ignored. A refusal of the prompt or
 * of an input (…SensitiveContentDetected) fails the task as content_blocked.
 */
export const arkImages: TaskProvider<ImageJob> = {
  name: 'ark',
  supports: (kind) => kind === 'image',
  ignores: (job) => [...(job.negativePrompt ? ['negative_prompt'] : []), ...(job.maskUrl ? ['mask_url'] : []), ...(job.quality ? ['quality'] : [])],

  async submit(job, ctx) {
    const body = {
      model: ctx.backend.model,
      prompt: job.prompt,
      size: seedreamSize(ctx.backend.model, job),
      ...(job.imageUrls.length > 0 ? { image: job.imageUrls.length === 1 ? job.imageUrls[0] : job.imageUrls } : {}),
      sequential_image_generation: 'disabled',
      response_format: 'url',
      watermark: false,
    };
    const bytes = Buffer.from(JSON.stringify(body));
    const answers = await Promise.all(
      Array.from({ length: job.n }, () =>
        callProvider(ctx, {
          method: 'POST',
          path: '/images/generations',
          headers: { ...arkAuth(ctx), 'content-type': 'application/json' },
          body: bytes,
          signal: ctx.signal,
        }),
      ),
    );
    const outputs: ProviderOutput[] = [];
    for (const r of answers) {
      if (r.status >= 400) {
        const err = arkError(r);
        if (err instanceof ProviderError && !err.retryable && SENSITIVE.test(err.code))
          return { state: 'failed', code: 'content_blocked', message: `${err.message} (${err.code})` };
        throw err;
      }
      for (const d of (r.json as { data?: { url?: string; b64_json?: string }[] } | undefined)?.data ?? []) {
        if (typeof d.url === 'string') outputs.push({ type: 'url', url: d.url });
        else if (typeof d.b64_json === 'string') outputs.push({ type: 'bytes', data: Buffer.from(d.b64_json, 'base64') });
      }
    }
    if (outputs.length === 0) throw new ProviderError(false, 'no_output', 'the upstream answered without images');
    return { state: 'succeeded', outputs, usage: { images: outputs.length } };
  },

  open: (output, ctx) => openUrl(ctx, output.url, ctx.signal),
};

/** Seedream 4 takes 1280x720 to 4096x4096 pixels in all: a smaller size is scaled up at its ratio (the price stays the tier's). */
const MIN_AREA = 1280 * 720;

export function seedreamSize(model: string, job: Pick<ImageJob, 'width' | 'height'>): string {
  let { width, height } = job;
  if (!/seedream-3/.test(model) && width * height < MIN_AREA) {
    const k = Math.sqrt(MIN_AREA / (width * height));
    width = Math.ceil((width * k) / 8) * 8;
    height = Math.ceil((height * k) / 8) * 8;
  }
  return `${width}x${height}`;
}
