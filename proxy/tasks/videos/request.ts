import { z } from 'zod';
import { badRequest } from '../../../kernel/errors.js';
import type { UrlPolicy } from '../../net/url-guard.js';
import { mediaUrl, parseWebhook, pick } from '../fields.js';
import { reduceRatio } from '../images/size.js';
import { detectVideoMode, type VideoMode } from './mode.js';

/**
 * Validation of a video submission (pure): the contract's fields and their aliases, checked
 * with one zod schema; every rule answers 400 in the OpenAI error shape naming the field as the
 * client wrote it. What the chosen model offers (resolutions, durations, inputs, audio) is
 * decided afterwards, in capabilities.ts, once the model is known.
 */

export const VIDEO_ENDPOINT = '/v1/videos/generations';
export const MAX_PROMPT = 32_000;
export const MAX_REFERENCE_IMAGES = 16;
export const MIN_DURATION = 4;
export const DEFAULT_DURATION = 5;
export const DEFAULT_RESOLUTION = '720p';
export const DEFAULT_ASPECT_RATIO = '16:9';
/** Ratios up to 4:1 either way. */
const MAX_RATIO = 4;

/** Each field and its alias (the contract's names); the field wins in messages, the alias when only it was given. */
export const ALIASES = {
  image_url: ['image_url', 'first_frame_url'],
  last_image_url: ['last_image_url', 'last_frame_url'],
  reference_image_urls: ['reference_image_urls', 'reference_images'],
  reference_video_url: ['reference_video_url', 'video_url'],
} as const;
type Aliased = keyof typeof ALIASES;

const KNOWN = new Set([
  'model',
  'prompt',
  'resolution',
  'aspect_ratio',
  'duration',
  'generate_audio',
  'negative_prompt',
  'webhook_url',
  'webhook_secret',
  ...Object.values(ALIASES).flat(),
]);

const required = (field: string, what: string) => (iss: { input?: unknown }) =>
  iss.input === undefined ? `${field} is required: ${what}` : `${field} must be a string`;

const Schema = z.object({
  model: z.string({ error: required('model', 'a video model code of your group') }).min(1, 'model must be a non-empty string'),
  prompt: z
    .string({ error: required('prompt', 'a description of the scene') })
    .refine((s) => s.trim() !== '', 'prompt must be a non-empty string')
    .refine((s) => s.length <= MAX_PROMPT, `prompt is longer than ${MAX_PROMPT} characters`),
  resolution: z
    .string({ error: 'resolution must be a string such as 480p, 720p or 1080p' })
    .regex(/^\d{3,4}p$/i, 'resolution must be a height in pixels followed by p, such as 480p, 720p or 1080p')
    .transform((s) => s.toLowerCase())
    .optional(),
  aspect_ratio: z
    .string({ error: 'aspect_ratio must be a string such as 16:9 or 9:16' })
    .regex(/^\d{1,2}:\d{1,2}$/, 'aspect_ratio must be two whole numbers such as 16:9 or 9:16')
    .refine((s) => {
      const [w, h] = s.split(':').map(Number) as [number, number];
      return w >= 1 && h >= 1 && Math.max(w, h) / Math.min(w, h) <= MAX_RATIO;
    }, `aspect_ratio must have both terms at least 1 and be at most ${MAX_RATIO}:1 either way`)
    .optional(),
  duration: z
    .number({ error: 'duration must be a whole number of seconds' })
    .int('duration must be a whole number of seconds')
    .min(MIN_DURATION, `duration must be at least ${MIN_DURATION} seconds`)
    .optional(),
  generate_audio: z.boolean({ error: 'generate_audio must be true or false' }).optional(),
  negative_prompt: z
    .string({ error: 'negative_prompt must be a string' })
    .refine((s) => s.length <= MAX_PROMPT, `negative_prompt is longer than ${MAX_PROMPT} characters`)
    .optional(),
  image_url: z.unknown().optional(),
  last_image_url: z.unknown().optional(),
  reference_image_urls: z
    .array(z.unknown(), { error: 'must be an array of http(s) URLs' })
    .max(MAX_REFERENCE_IMAGES, `holds at most ${MAX_REFERENCE_IMAGES} URLs`)
    .optional(),
  reference_video_url: z.unknown().optional(),
});

/** A request as the client meant it, before the model's capabilities are applied. */
export interface VideoRequest {
  model: string;
  prompt: string;
  mode: VideoMode;
  duration?: number;
  resolution?: string;
  aspectRatio: string;
  generateAudio?: boolean;
  negativePrompt?: string;
  firstFrameUrl?: string;
  lastFrameUrl?: string;
  referenceImageUrls: string[];
  referenceVideoUrl?: string;
  webhook?: { url: string; secret: string };
  /** Unknown fields of the body. */
  ignored: string[];
}

export function parseVideoRequest(body: Record<string, unknown>, policy: UrlPolicy): VideoRequest {
  // Aliases first: a field and its alias that disagree are a 400 naming the alias.
  const names: Partial<Record<Aliased, string>> = {};
  const canonical: Record<string, unknown> = { ...body };
  for (const [field, list] of Object.entries(ALIASES) as [Aliased, readonly string[]][]) {
    const got = pick(body, list);
    for (const n of list) delete canonical[n];
    if (got) {
      names[field] = got.name;
      canonical[field] = got.value;
    }
  }
  for (const k of Object.keys(canonical)) if (canonical[k] === null) delete canonical[k];

  const parsed = Schema.safeParse(canonical);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const [top, ...rest] = issue.path;
    const field = names[top as Aliased] ?? String(top ?? 'body');
    const param = field + rest.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
    // Messages of the aliased array rules do not carry the field name: add the one the client used.
    const message = issue.message.startsWith(String(top)) ? issue.message.replace(String(top), field) : `${field} ${issue.message}`;
    throw badRequest(message, param);
  }
  const v = parsed.data;
  const url = (field: Aliased, value: unknown, suffix = '') => mediaUrl(value, `${names[field] ?? field}${suffix}`, policy);

  const firstFrameUrl = v.image_url !== undefined ? url('image_url', v.image_url) : undefined;
  const lastFrameUrl = v.last_image_url !== undefined ? url('last_image_url', v.last_image_url) : undefined;
  const referenceImageUrls = (v.reference_image_urls ?? []).map((u, i) => url('reference_image_urls', u, `[${i}]`));
  const referenceVideoUrl = v.reference_video_url !== undefined ? url('reference_video_url', v.reference_video_url) : undefined;
  const webhook = parseWebhook(body, policy);

  return {
    model: v.model,
    prompt: v.prompt,
    mode: detectVideoMode({ firstFrameUrl, lastFrameUrl, referenceImageUrls, referenceVideoUrl }),
    ...(v.duration !== undefined ? { duration: v.duration } : {}),
    ...(v.resolution !== undefined ? { resolution: v.resolution } : {}),
    aspectRatio: v.aspect_ratio ? reduceRatio(...(v.aspect_ratio.split(':').map(Number) as [number, number])) : DEFAULT_ASPECT_RATIO,
    ...(v.generate_audio !== undefined ? { generateAudio: v.generate_audio } : {}),
    ...(v.negative_prompt?.trim() ? { negativePrompt: v.negative_prompt } : {}),
    ...(firstFrameUrl ? { firstFrameUrl } : {}),
    ...(lastFrameUrl ? { lastFrameUrl } : {}),
    referenceImageUrls,
    ...(referenceVideoUrl ? { referenceVideoUrl } : {}),
    ...(webhook ? { webhook } : {}),
    ignored: Object.keys(body)
      .filter((k) => !KNOWN.has(k))
      .sort(),
  };
}
