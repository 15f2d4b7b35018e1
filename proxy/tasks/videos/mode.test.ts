import { describe, expect, it } from 'vitest';
import { detectVideoMode } from './mode.js';

const V = 'https://media.example.com/clip.mp4';
const I = 'https://media.example.com/frame.png';

describe('detectVideoMode', () => {
  it.each([
    ['nothing but a prompt', {}, 'text-to-video'],
    ['an empty reference image list', { referenceImageUrls: [] }, 'text-to-video'],
    ['a first frame', { firstFrameUrl: I }, 'image-to-video'],
    ['a last frame alone', { lastFrameUrl: I }, 'image-to-video'],
    ['reference images', { referenceImageUrls: [I, I] }, 'image-to-video'],
    ['first and last frames', { firstFrameUrl: I, lastFrameUrl: I }, 'image-to-video'],
    ['a reference video', { referenceVideoUrl: V }, 'video-to-video'],
    ['a reference video with image inputs (the video wins)', { referenceVideoUrl: V, firstFrameUrl: I, referenceImageUrls: [I] }, 'video-to-video'],
  ] as const)('%s -> %s', (_what, inputs, mode) => {
    expect(detectVideoMode(inputs)).toBe(mode);
  });
});
