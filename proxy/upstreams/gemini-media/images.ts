import type { ImageJob, ProviderContext, ProviderOutcome, ProviderOutput, TaskProvider } from '../task-provider.js';
import { callProvider } from '../task-http.js';
import { authOf, googleError, inline, modelPath } from './endpoint.js';

/**
 * Gemini image models ("Nano Banana": gemini-2.5-flash-image, gemini-3-pro-image-preview) through
 * generateContent with image output: `responseModalities: ["IMAGE"]`, `imageConfig.aspectRatio`
 * (the nearest ratio the models take) and `imageConfig.imageSize` (the contract's tiers 1K/2K/4K,
 * one to one; not sent to 2.5 Flash Image, which makes 1K only). Edits and inpainting download
 * the client's images and mask and pass them as inline parts after the prompt. One call makes
 * one image: n images are n calls. The answer's inline base64 images are the results. A prompt
 * or image refused by the safety system (blockReason, finishReason *SAFETY / PROHIBITED_*) fails
 * the task as content_blocked; an answer without an image (NO_IMAGE, text only) as no_image.
 */
export const geminiImages: TaskProvider<ImageJob> = {
  name: 'gemini',
  supports: (kind) => kind === 'image',
  ignores: (job) => [...(job.negativePrompt ? ['negative_prompt'] : []), ...(job.quality ? ['quality'] : [])],

  async submit(job, ctx) {
    const body = Buffer.from(JSON.stringify(await requestOf(job, ctx)));
    const auth = await authOf(ctx);
    const answers = await Promise.all(
      Array.from({ length: job.n }, () =>
        callProvider(ctx, {
          method: 'POST',
          path: modelPath(ctx.backend, 'generateContent'),
          headers: { ...auth, 'content-type': 'application/json' },
          body,
          signal: ctx.signal,
        }),
      ),
    );
    const outputs: ProviderOutput[] = [];
    for (const r of answers) {
      if (r.status >= 400) throw googleError(r);
      const got = imagesOf(r.json as GenerateContentResponse);
      if ('failed' in got) return got.failed;
      outputs.push(...got.outputs);
    }
    return { state: 'succeeded', outputs, usage: { images: outputs.length } };
  },
};

/** The aspect ratios Gemini image models take. */
export const GEMINI_RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];

/** The supported ratio nearest to `w:h` (by the logarithm of the ratio, so 2:1 is as far from 1:1 as 1:2). */
export function nearestRatio(ratio: string, offered: readonly string[] = GEMINI_RATIOS): string {
  const value = (r: string) => {
    const [w, h] = r.split(':').map(Number) as [number, number];
    return Math.log(w / h);
  };
  const want = value(ratio);
  return offered.reduce((best, r) => (Math.abs(value(r) - want) < Math.abs(value(best) - want) ? r : best), offered[0]!);
}

async function requestOf(job: ImageJob, ctx: ProviderContext): Promise<Record<string, unknown>> {
  const parts: Record<string, unknown>[] = [{ text: job.prompt }];
  for (let i = 0; i < job.imageUrls.length; i++) parts.push({ inlineData: await inline(await ctx.fetchMedia(job.imageUrls[i]!, `image_urls[${i}]`)) });
  if (job.maskUrl) {
    parts.push({ text: 'Mask: white marks the area of the image above to repaint; keep everything else unchanged.' });
    parts.push({ inlineData: await inline(await ctx.fetchMedia(job.maskUrl, 'mask_url')) });
  }
  const sized = !/gemini-2\.5-flash-image/.test(ctx.backend.model);
  return {
    contents: [{ role: 'user', parts }],
    generationConfig: {
      responseModalities: ['IMAGE'],
      imageConfig: { aspectRatio: nearestRatio(job.aspectRatio), ...(sized ? { imageSize: job.resolution } : {}) },
    },
  };
}

interface GenerateContentResponse {
  candidates?: { content?: { parts?: { text?: string; inlineData?: { mimeType?: string; data?: string } }[] }; finishReason?: string }[];
  promptFeedback?: { blockReason?: string; blockReasonMessage?: string };
}

const BLOCKED = /SAFETY|PROHIBITED|BLOCKLIST|SPII|RECITATION/;

function imagesOf(r: GenerateContentResponse | undefined): { outputs: ProviderOutput[] } | { failed: Extract<ProviderOutcome, { state: 'failed' }> } {
  const block = r?.promptFeedback?.blockReason;
  if (block)
    return {
      failed: {
        state: 'failed',
        code: 'content_blocked',
        message: `the upstream blocked the prompt (${block})${r?.promptFeedback?.blockReasonMessage ? `: ${r.promptFeedback.blockReasonMessage}` : ''}`,
      },
    };
  const outputs: ProviderOutput[] = [];
  let reason: string | undefined;
  let said = '';
  for (const c of r?.candidates ?? []) {
    reason ??= c.finishReason;
    for (const p of c.content?.parts ?? []) {
      if (p.inlineData?.data)
        outputs.push({
          type: 'bytes',
          data: Buffer.from(p.inlineData.data, 'base64'),
          ...(p.inlineData.mimeType ? { contentType: p.inlineData.mimeType } : {}),
        });
      else if (typeof p.text === 'string') said += p.text;
    }
  }
  if (outputs.length > 0) return { outputs };
  if (reason && BLOCKED.test(reason)) return { failed: { state: 'failed', code: 'content_blocked', message: `the upstream refused the image (${reason})` } };
  return {
    failed: {
      state: 'failed',
      code: 'no_image',
      message: `the upstream answered without an image (${reason ?? 'no candidates'})${said ? `: ${said.slice(0, 300)}` : ''}`,
    },
  };
}
