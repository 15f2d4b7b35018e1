import { badRequest } from '../../../kernel/errors.js';
import type { UrlPolicy } from '../../net/url-guard.js';
import { mediaUrl as url, parseWebhook, pick, type Picked } from '../fields.js';
import type { ImageJob } from '../../upstreams/task-provider.js';
import { parseTier, resolveSize, type Tier } from './size.js';

/**
 * Validation of an image submission (pure): every rule answers 400 naming the field. The three
 * fields the contract leaves unnamed are `resolution` (aliases image_size, imageSize),
 * `quality` and `negative_prompt` (alias negativePrompt). Fields this gateway does not know are
 * not an error: they are listed on the task as ignored.
 */
export type ImageMode = ImageJob['mode'];

export interface ImageSubmission {
  job: ImageJob;
  webhook?: { url: string; secret: string };
  /** Unknown fields of the body. */
  ignored: string[];
}

const KNOWN = new Set([
  'model',
  'prompt',
  'n',
  'size',
  'resolution',
  'image_size',
  'imageSize',
  'quality',
  'negative_prompt',
  'negativePrompt',
  'image_urls',
  'image',
  'mask_url',
  'webhook_url',
  'webhook_secret',
]);

export const MAX_PROMPT = 32_000;
export const MAX_IMAGES = 16;

export const ENDPOINT: Record<ImageMode, string> = {
  generate: '/v1/images/generations',
  edit: '/v1/images/edits',
  inpaint: '/v1/images/inpaint',
};

function str(f: Picked | undefined, opts: { max?: number; required?: string } = {}): string | undefined {
  if (!f) return undefined;
  if (typeof f.value !== 'string' || f.value.trim() === '') throw badRequest(`${f.name} must be a non-empty string`, f.name);
  if (opts.max && f.value.length > opts.max) throw badRequest(`${f.name} is longer than ${opts.max} characters`, f.name);
  return f.value;
}

export function parseImageRequest(body: Record<string, unknown>, mode: ImageMode, policy: UrlPolicy): ImageSubmission {
  const model = body.model;
  if (model === undefined || model === null) throw badRequest('model is required: an image model code of your group', 'model');
  if (typeof model !== 'string' || model === '') throw badRequest('model must be a non-empty string', 'model');

  if (body.prompt === undefined || body.prompt === null) throw badRequest('prompt is required: a description of the image', 'prompt');
  const prompt = str({ name: 'prompt', value: body.prompt }, { max: MAX_PROMPT })!;

  let n = 1;
  if (body.n !== undefined && body.n !== null) {
    if (typeof body.n !== 'number' || !Number.isInteger(body.n) || body.n < 1 || body.n > 4) throw badRequest('n must be an integer from 1 to 4', 'n');
    n = body.n;
  }

  const tierField = pick(body, ['resolution', 'image_size', 'imageSize']);
  let tier: Tier | undefined;
  if (tierField) {
    tier = typeof tierField.value === 'string' ? parseTier(tierField.value) : undefined;
    if (!tier) throw badRequest(`${tierField.name} must be one of 1K, 2K, 4K`, tierField.name);
  }
  if (body.size !== undefined && body.size !== null && (typeof body.size !== 'string' || body.size.trim() === '')) {
    throw badRequest('size must be a string: pixels such as 1024x1024 or a ratio such as 16:9', 'size');
  }
  const size = resolveSize(body.size as string | undefined, tier);
  if ('error' in size) throw badRequest(size.error, size.field === 'resolution' ? (tierField?.name ?? 'resolution') : 'size');

  const quality = str(pick(body, ['quality']), { max: 64 });
  const negativePrompt = str(pick(body, ['negative_prompt', 'negativePrompt']), { max: MAX_PROMPT });

  let imageUrls: string[] = [];
  const list = body.image_urls;
  const single = body.image;
  if (list !== undefined && list !== null) {
    if (!Array.isArray(list)) throw badRequest('image_urls must be an array of http(s) URLs', 'image_urls');
    if (list.length > MAX_IMAGES) throw badRequest(`image_urls holds at most ${MAX_IMAGES} URLs`, 'image_urls');
    imageUrls = list.map((u, i) => url(u, `image_urls[${i}]`, policy));
  }
  if (single !== undefined && single !== null) {
    const one = url(single, 'image', policy);
    if (imageUrls.length > 0 && !(imageUrls.length === 1 && imageUrls[0] === one)) {
      throw badRequest('give image_urls or image, not both', 'image');
    }
    imageUrls = [one];
  }
  const maskRaw = body.mask_url;
  const maskUrl = maskRaw === undefined || maskRaw === null ? undefined : url(maskRaw, 'mask_url', policy);

  if (mode === 'generate' && imageUrls.length > 0) {
    throw badRequest(
      `${list ? 'image_urls' : 'image'} is not taken by ${ENDPOINT.generate}; send reference images to ${ENDPOINT.edit}`,
      list ? 'image_urls' : 'image',
    );
  }
  if (mode !== 'generate' && imageUrls.length === 0) throw badRequest(`image_urls (or image) is required by ${ENDPOINT[mode]}`, 'image_urls');
  if (mode === 'inpaint' && !maskUrl) throw badRequest(`mask_url is required by ${ENDPOINT.inpaint}: white marks the area to repaint`, 'mask_url');
  if (mode !== 'inpaint' && maskUrl) throw badRequest(`mask_url is only taken by ${ENDPOINT.inpaint}`, 'mask_url');

  const webhook = parseWebhook(body, policy);

  const job: ImageJob = {
    kind: 'image',
    mode,
    prompt,
    ...(negativePrompt !== undefined ? { negativePrompt } : {}),
    n,
    width: size.width,
    height: size.height,
    aspectRatio: size.aspectRatio,
    sizeFrom: size.sizeFrom,
    resolution: size.resolution,
    ...(quality !== undefined ? { quality } : {}),
    imageUrls,
    ...(maskUrl ? { maskUrl } : {}),
  };
  return {
    job,
    ...(webhook ? { webhook } : {}),
    ignored: Object.keys(body)
      .filter((k) => !KNOWN.has(k))
      .sort(),
  };
}
