import type { ImageJob, LocalMedia, ProviderOutcome, ProviderOutput, TaskProvider } from '../task-provider.js';
import { ProviderError } from '../task-provider.js';
import { callProvider, openUrl, statusError, type ProviderResponse } from '../task-http.js';
import { multipartBody, type Part } from './multipart.js';

/**
 * OpenAI Images (POST /images/generations JSON, POST /images/edits multipart), synchronous: the
 * answer carries the images, base64 (GPT image models) or as URLs (dall-e with response_format
 * url). Edits and inpaint download the client's image URLs and upload them as files; inpaint
 * adds the mask. OpenAI has no negative prompt: it is listed as ignored.
 */
export const openaiImages: TaskProvider<ImageJob> = {
  name: 'openai',
  supports: (kind) => kind === 'image',
  ignores: (job) => (job.negativePrompt ? ['negative_prompt'] : []),

  async submit(job, ctx) {
    const model = ctx.backend.model;
    const size = openaiSize(model, job);
    const auth: Record<string, string> = ctx.credential ? { authorization: `Bearer ${ctx.credential}` } : {};
    let r: ProviderResponse;
    if (job.mode === 'generate') {
      const body = {
        model,
        prompt: job.prompt,
        n: job.n,
        size,
        ...(job.quality ? { quality: job.quality } : {}),
        // GPT image models always answer base64 and reject response_format.
        ...(model.startsWith('dall-e') ? { response_format: 'b64_json' } : {}),
      };
      r = await callProvider(ctx, {
        method: 'POST',
        path: '/images/generations',
        headers: { ...auth, 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify(body)),
        signal: ctx.signal,
      });
    } else {
      const images: LocalMedia[] = [];
      for (let i = 0; i < job.imageUrls.length; i++) images.push(await ctx.fetchMedia(job.imageUrls[i]!, `image_urls[${i}]`));
      const mask = job.maskUrl ? await ctx.fetchMedia(job.maskUrl, 'mask_url') : undefined;
      const parts: Part[] = [
        { name: 'model', value: model },
        { name: 'prompt', value: job.prompt },
        { name: 'n', value: String(job.n) },
        { name: 'size', value: size },
        ...(job.quality ? [{ name: 'quality', value: job.quality }] : []),
        ...(model.startsWith('dall-e') ? [{ name: 'response_format', value: 'b64_json' }] : []),
        // As the official SDK sends them: one file as `image`, several as `image[]`.
        ...images.map((file) => ({ name: images.length > 1 ? 'image[]' : 'image', file })),
        ...(mask ? [{ name: 'mask', file: mask }] : []),
      ];
      const form = multipartBody(parts);
      r = await callProvider(ctx, {
        method: 'POST',
        path: '/images/edits',
        headers: { ...auth, 'content-type': form.contentType, 'content-length': String(form.length) },
        body: form.stream(),
        signal: ctx.signal,
      });
    }
    return outcomeOf(r);
  },

  open: (output, ctx) => openUrl(ctx, output.url, ctx.signal),
};

function outcomeOf(r: ProviderResponse): ProviderOutcome {
  const json = r.json as
    { data?: { b64_json?: string; url?: string }[]; output_format?: string; error?: { message?: string; code?: string | null; type?: string } } | undefined;
  if (r.status >= 400) {
    const e = json?.error;
    throw statusError(r, e?.message, e?.code ?? undefined);
  }
  const format = json?.output_format;
  const contentType = format === 'jpeg' ? 'image/jpeg' : format === 'webp' ? 'image/webp' : undefined;
  const outputs: ProviderOutput[] = [];
  for (const d of json?.data ?? []) {
    if (typeof d.b64_json === 'string') outputs.push({ type: 'bytes', data: Buffer.from(d.b64_json, 'base64'), ...(contentType ? { contentType } : {}) });
    else if (typeof d.url === 'string') outputs.push({ type: 'url', url: d.url });
  }
  if (outputs.length === 0) throw new ProviderError(false, 'no_output', 'the upstream answered without images');
  return { state: 'succeeded', outputs, usage: { images: outputs.length } };
}

/**
 * The size sent upstream: pixels the client gave go as they are. A ratio (or nothing) becomes,
 * for OpenAI's own models, which accept only a few sizes, the model family's size of that
 * orientation; any other model behind this protocol (OpenAI-compatible image servers, the
 * simulator) gets the pixels computed from the ratio and the tier.
 */
export function openaiSize(model: string, job: Pick<ImageJob, 'width' | 'height' | 'sizeFrom'>): string {
  const computed = `${job.width}x${job.height}`;
  if (job.sizeFrom === 'pixels') return computed;
  const r = job.width / job.height;
  const orientation = r > 1.2 ? 'landscape' : r < 1 / 1.2 ? 'portrait' : 'square';
  if (model.startsWith('dall-e-2')) return '1024x1024';
  if (model.startsWith('dall-e-3')) return { square: '1024x1024', landscape: '1792x1024', portrait: '1024x1792' }[orientation];
  if (/^(gpt-image|chatgpt-image)/.test(model)) return { square: '1024x1024', landscape: '1536x1024', portrait: '1024x1536' }[orientation];
  return computed;
}
