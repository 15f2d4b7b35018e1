import type { ImageJob, TaskJob, VideoJob } from '../task-provider.js';

/**
 * fal.ai hosts hundreds of endpoints whose inputs differ only in naming: which field carries the
 * first frame, the last frame, the reference images or video, how the duration is spelled ("5",
 * 5 or "8s") and which durations exist. A family is that naming, as data; the backend's model
 * (the fal endpoint id, e.g. "fal-ai/kling-video/v2.1/pro/image-to-video") picks the first
 * family whose pattern it matches. A job input whose field a family lacks is not sent and is
 * listed on the task as ignored.
 */
export interface FalFamily {
  name: string;
  match: RegExp;
  /** Field names of the video inputs. */
  video?: {
    firstFrame?: string;
    lastFrame?: string;
    referenceImages?: string;
    referenceVideo?: string;
    duration?: string;
    resolution?: string;
    aspectRatio?: string;
    audio?: string;
    negativePrompt?: string;
  };
  /** Field names of the image inputs. */
  image?: {
    /** All input images, as a list. */
    images?: string;
    /** The first input image only (endpoints that take one). */
    image?: string;
    mask?: string;
    count?: string;
    /** `{width, height}` in pixels. */
    size?: string;
    aspectRatio?: string;
    /** The tier as fal spells it: "1K", "2K", "4K". */
    resolution?: string;
    negativePrompt?: string;
  };
  /** The durations the endpoints take (the longest not above the asked one is sent); absent: any. */
  durations?: number[];
  /** How the duration travels: a number, a string of digits, or digits and "s". */
  durationFormat?: 'number' | 'string' | 'seconds';
  /** The family's names of the contract's resolutions ("720p" -> "768P"); absent: as they are. */
  resolutions?: Record<string, string>;
  /** Fixed fields every call of the family carries. */
  extra?: Record<string, unknown>;
}

export const FAL_FAMILIES: readonly FalFamily[] = [
  {
    // Kling's elements / reference-to-video endpoints: the references are the subject.
    name: 'kling-reference',
    match: /kling.*(elements|reference)/i,
    video: { referenceImages: 'input_image_urls', duration: 'duration', aspectRatio: 'aspect_ratio', negativePrompt: 'negative_prompt' },
    durations: [5, 10],
    durationFormat: 'string',
  },
  {
    name: 'kling',
    match: /kling/i,
    video: {
      firstFrame: 'image_url',
      lastFrame: 'tail_image_url',
      duration: 'duration',
      aspectRatio: 'aspect_ratio',
      audio: 'generate_audio',
      negativePrompt: 'negative_prompt',
    },
    durations: [5, 10],
    durationFormat: 'string',
  },
  {
    name: 'seedance',
    match: /seedance/i,
    video: {
      firstFrame: 'image_url',
      lastFrame: 'end_image_url',
      referenceImages: 'reference_image_urls',
      duration: 'duration',
      resolution: 'resolution',
      aspectRatio: 'aspect_ratio',
      audio: 'generate_audio',
    },
    durationFormat: 'string',
  },
  {
    name: 'wan',
    match: /(^|\/)wan[-/]|wan-?2/i,
    video: {
      firstFrame: 'image_url',
      lastFrame: 'end_image_url',
      referenceImages: 'reference_image_urls',
      referenceVideo: 'video_url',
      duration: 'duration',
      resolution: 'resolution',
      aspectRatio: 'aspect_ratio',
      negativePrompt: 'negative_prompt',
    },
    durations: [5, 10],
    durationFormat: 'string',
  },
  {
    name: 'hailuo',
    match: /minimax|hailuo/i,
    video: { firstFrame: 'image_url', lastFrame: 'end_image_url', duration: 'duration', resolution: 'resolution' },
    durations: [6, 10],
    durationFormat: 'string',
    resolutions: { '480p': '512P', '512p': '512P', '720p': '768P', '768p': '768P', '1080p': '1080P' },
    extra: { prompt_optimizer: true },
  },
  {
    name: 'veo-first-last',
    match: /veo.*first-last/i,
    video: {
      firstFrame: 'first_frame_url',
      lastFrame: 'last_frame_url',
      duration: 'duration',
      resolution: 'resolution',
      aspectRatio: 'aspect_ratio',
      audio: 'generate_audio',
      negativePrompt: 'negative_prompt',
    },
    durations: [4, 6, 8],
    durationFormat: 'seconds',
  },
  {
    name: 'veo-reference',
    match: /veo.*reference/i,
    video: { referenceImages: 'image_urls', duration: 'duration', resolution: 'resolution', aspectRatio: 'aspect_ratio', audio: 'generate_audio' },
    durations: [8],
    durationFormat: 'seconds',
  },
  {
    name: 'veo',
    match: /veo/i,
    video: {
      firstFrame: 'image_url',
      duration: 'duration',
      resolution: 'resolution',
      aspectRatio: 'aspect_ratio',
      audio: 'generate_audio',
      negativePrompt: 'negative_prompt',
    },
    durations: [4, 6, 8],
    durationFormat: 'seconds',
  },
  { name: 'flux-fill', match: /flux.*fill/i, image: { image: 'image_url', mask: 'mask_url', count: 'num_images', size: 'image_size' } },
  { name: 'flux-kontext', match: /kontext/i, image: { image: 'image_url', count: 'num_images', aspectRatio: 'aspect_ratio' } },
  { name: 'flux', match: /flux/i, image: { image: 'image_url', count: 'num_images', size: 'image_size' } },
  { name: 'seedream', match: /seedream/i, image: { images: 'image_urls', count: 'num_images', size: 'image_size' } },
  {
    name: 'nano-banana',
    match: /nano-banana|gemini/i,
    image: { images: 'image_urls', count: 'num_images', aspectRatio: 'aspect_ratio', resolution: 'resolution' },
  },
];

/** Endpoints of no known family: the names most fal endpoints use. */
export const FAL_DEFAULT: FalFamily = {
  name: 'default',
  match: /.*/,
  video: {
    firstFrame: 'image_url',
    lastFrame: 'end_image_url',
    referenceImages: 'reference_image_urls',
    referenceVideo: 'video_url',
    duration: 'duration',
    resolution: 'resolution',
    aspectRatio: 'aspect_ratio',
    audio: 'generate_audio',
    negativePrompt: 'negative_prompt',
  },
  image: { images: 'image_urls', mask: 'mask_url', count: 'num_images', size: 'image_size', negativePrompt: 'negative_prompt' },
  durationFormat: 'number',
};

export function falFamily(model: string): FalFamily {
  return FAL_FAMILIES.find((f) => f.match.test(model)) ?? FAL_DEFAULT;
}

/** The fields of `family` for a job's kind: the family's own, else the default's. */
function fieldsOf(family: FalFamily, kind: 'image'): NonNullable<FalFamily['image']>;
function fieldsOf(family: FalFamily, kind: 'video'): NonNullable<FalFamily['video']>;
function fieldsOf(family: FalFamily, kind: TaskJob['kind']) {
  return kind === 'image' ? (family.image ?? FAL_DEFAULT.image!) : (family.video ?? FAL_DEFAULT.video!);
}

/** The duration sent: the longest the family takes not above the asked one (else its shortest), so the client never pays for more than asked. */
export function falDuration(family: FalFamily, asked: number): number {
  const d = family.durations;
  if (!d || d.length === 0) return asked;
  return (
    [...d]
      .sort((a, b) => a - b)
      .filter((x) => x <= asked)
      .pop() ?? Math.min(...d)
  );
}

/** The contract's names of the job inputs this family cannot carry (pure). */
export function falIgnored(job: TaskJob, family: FalFamily): string[] {
  const out: string[] = [];
  if (job.kind === 'video') {
    const f = fieldsOf(family, 'video');
    if (job.firstFrameUrl && !f.firstFrame) out.push('image_url');
    if (job.lastFrameUrl && !f.lastFrame) out.push('last_image_url');
    if (job.referenceImageUrls.length > 0 && !f.referenceImages) out.push('reference_image_urls');
    if (job.referenceVideoUrl && !f.referenceVideo) out.push('reference_video_url');
    if (job.negativePrompt && !f.negativePrompt) out.push('negative_prompt');
  } else {
    const f = fieldsOf(family, 'image');
    if (job.negativePrompt && !f.negativePrompt) out.push('negative_prompt');
    if (job.maskUrl && !f.mask) out.push('mask_url');
    if (job.imageUrls.length > 0 && !f.images && !f.image) out.push('image_urls');
  }
  return out;
}

/** The fal input of a job for this family (pure). */
export function falInput(job: TaskJob, family: FalFamily): Record<string, unknown> {
  return { prompt: job.prompt, ...(job.kind === 'video' ? videoInput(job, family) : imageInput(job, family)), ...family.extra };
}

function videoInput(job: VideoJob, family: FalFamily): Record<string, unknown> {
  const f = fieldsOf(family, 'video');
  const out: Record<string, unknown> = {};
  const set = (field: string | undefined, value: unknown) => {
    if (field && value !== undefined) out[field] = value;
  };
  const seconds = falDuration(family, job.duration);
  set(f.duration, family.durationFormat === 'string' ? String(seconds) : family.durationFormat === 'seconds' ? `${seconds}s` : seconds);
  set(f.resolution, family.resolutions?.[job.resolution] ?? job.resolution);
  set(f.aspectRatio, job.aspectRatio);
  set(f.audio, job.generateAudio);
  set(f.firstFrame, job.firstFrameUrl);
  set(f.lastFrame, job.lastFrameUrl);
  set(f.referenceImages, job.referenceImageUrls.length > 0 ? job.referenceImageUrls : undefined);
  set(f.referenceVideo, job.referenceVideoUrl);
  set(f.negativePrompt, job.negativePrompt);
  return out;
}

function imageInput(job: ImageJob, family: FalFamily): Record<string, unknown> {
  const f = fieldsOf(family, 'image');
  const out: Record<string, unknown> = {};
  const set = (field: string | undefined, value: unknown) => {
    if (field && value !== undefined) out[field] = value;
  };
  set(f.count, job.n);
  set(f.size, { width: job.width, height: job.height });
  set(f.aspectRatio, job.aspectRatio);
  set(f.resolution, job.resolution);
  set(f.negativePrompt, job.negativePrompt);
  if (job.imageUrls.length > 0) {
    if (f.images) out[f.images] = job.imageUrls;
    else set(f.image, job.imageUrls[0]);
  }
  set(f.mask, job.maskUrl);
  return out;
}
