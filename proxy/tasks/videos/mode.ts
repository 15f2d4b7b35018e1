import type { VideoJob } from '../../upstreams/task-provider.js';

export type VideoMode = VideoJob['mode'];

/** The media inputs of a video request, as the client passed them. */
export interface VideoInputs {
  firstFrameUrl?: string | undefined;
  lastFrameUrl?: string | undefined;
  referenceImageUrls?: readonly string[] | undefined;
  referenceVideoUrl?: string | undefined;
}

/**
 * The contract's mode rules, in order: a reference video makes it video-to-video; else any
 * image input (first frame, last frame, reference images) image-to-video; else text-to-video.
 * Decided on what the client passed, before inputs the model cannot take are dropped, so the
 * mode says what was asked for (the dropped inputs are listed as ignored).
 */
export function detectVideoMode(i: VideoInputs): VideoMode {
  if (i.referenceVideoUrl) return 'video-to-video';
  if (i.firstFrameUrl || i.lastFrameUrl || (i.referenceImageUrls?.length ?? 0) > 0) return 'image-to-video';
  return 'text-to-video';
}
