import { badRequest, GatewayError } from '../../../kernel/errors.js';
import type { VideoJob } from '../../upstreams/task-provider.js';
import { DEFAULT_DURATION, DEFAULT_RESOLUTION, MIN_DURATION, type VideoRequest } from './request.js';

/** ModelRoute capabilities of a video model. An input the model does not declare is not taken. */
export interface VideoCapabilities {
  firstFrame?: boolean;
  lastFrame?: boolean;
  referenceImages?: boolean;
  referenceVideo?: boolean;
  audio?: boolean;
  resolutions?: string[];
  minDuration?: number;
  maxDuration?: number;
}

/** The longest video a model without capabilities.maxDuration is asked for. */
export const MAX_DURATION = 600;

/**
 * The request fitted to the model (pure): the resolution it offers (its `resolutions`, else the
 * resolutions it has a per-second price for, else any), a duration within its range (404
 * otherwise, as the contract has it), audio only where offered, and media inputs it does not
 * take dropped and returned as ignored (by the contract's field names).
 */
export function fitVideoRequest(req: VideoRequest, model: string, caps: VideoCapabilities, priced: readonly string[]): { job: VideoJob; ignored: string[] } {
  const ignored: string[] = [];
  const listed = caps.resolutions?.map((r) => r.toLowerCase());
  const offered = listed ?? (priced.length > 0 ? [...priced] : undefined);
  let resolution: string;
  if (req.resolution !== undefined) {
    if (offered && !offered.includes(req.resolution)) {
      throw badRequest(`resolution ${req.resolution} is not offered by model "${model}" (offered: ${offered.join(', ')})`, 'resolution');
    }
    resolution = req.resolution;
  } else resolution = !offered || offered.includes(DEFAULT_RESOLUTION) ? DEFAULT_RESOLUTION : offered[0]!;

  const min = Math.max(MIN_DURATION, caps.minDuration ?? MIN_DURATION);
  const max = caps.maxDuration ?? MAX_DURATION;
  let duration: number;
  if (req.duration !== undefined) {
    if (req.duration < min || req.duration > max) {
      throw new GatewayError('not_found', `duration ${req.duration} is not offered by model "${model}" in this group (it offers ${min} to ${max} seconds)`, {
        param: 'duration',
      });
    }
    duration = req.duration;
  } else duration = Math.min(max, Math.max(min, DEFAULT_DURATION));

  const audioOffered = caps.audio === true;
  if (req.generateAudio === true && !audioOffered) ignored.push('generate_audio');
  const generateAudio = (req.generateAudio ?? true) && audioOffered;

  const keep = <T>(value: T | undefined, offered: boolean | undefined, field: string): T | undefined => {
    if (value === undefined) return undefined;
    if (offered === true) return value;
    ignored.push(field);
    return undefined;
  };
  const firstFrameUrl = keep(req.firstFrameUrl, caps.firstFrame, 'image_url');
  const lastFrameUrl = keep(req.lastFrameUrl, caps.lastFrame, 'last_image_url');
  const referenceImageUrls = keep(req.referenceImageUrls.length > 0 ? req.referenceImageUrls : undefined, caps.referenceImages, 'reference_image_urls') ?? [];
  const referenceVideoUrl = keep(req.referenceVideoUrl, caps.referenceVideo, 'reference_video_url');

  const job: VideoJob = {
    kind: 'video',
    mode: req.mode,
    prompt: req.prompt,
    duration,
    resolution,
    aspectRatio: req.aspectRatio,
    generateAudio,
    ...(firstFrameUrl ? { firstFrameUrl } : {}),
    ...(lastFrameUrl ? { lastFrameUrl } : {}),
    referenceImageUrls,
    ...(referenceVideoUrl ? { referenceVideoUrl } : {}),
    ...(req.negativePrompt ? { negativePrompt: req.negativePrompt } : {}),
  };
  return { job, ignored: [...new Set([...req.ignored, ...ignored])].sort() };
}
