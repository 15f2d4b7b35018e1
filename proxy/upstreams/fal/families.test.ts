import { describe, expect, it } from 'vitest';
import type { ImageJob, VideoJob } from '../task-provider.js';
import { falDuration, falFamily, falIgnored, falInput } from './families.js';

const video = (j: Partial<VideoJob> = {}): VideoJob => ({
  kind: 'video',
  mode: 'text-to-video',
  prompt: 'p',
  duration: 5,
  resolution: '720p',
  aspectRatio: '16:9',
  generateAudio: false,
  referenceImageUrls: [],
  ...j,
});
const image = (j: Partial<ImageJob> = {}): ImageJob => ({
  kind: 'image',
  mode: 'generate',
  prompt: 'p',
  n: 1,
  width: 1024,
  height: 1024,
  aspectRatio: '1:1',
  sizeFrom: 'ratio',
  resolution: '1K',
  imageUrls: [],
  ...j,
});

describe('fal families', () => {
  it('pick the family by the endpoint id, else the default naming', () => {
    expect(falFamily('fal-ai/kling-video/v2.1/pro/image-to-video').name).toBe('kling');
    expect(falFamily('fal-ai/minimax/hailuo-02/standard/image-to-video').name).toBe('hailuo');
    expect(falFamily('fal-ai/wan-25-preview/text-to-video').name).toBe('wan');
    expect(falFamily('fal-ai/veo3/fast').name).toBe('veo');
    expect(falFamily('fal-ai/veo3.1/first-last-frame-to-video').name).toBe('veo-first-last');
    expect(falFamily('fal-ai/veo3.1/reference-to-video').name).toBe('veo-reference');
    expect(falFamily('fal-ai/kling-video/v1.6/standard/elements').name).toBe('kling-reference');
    expect(falFamily('fal-ai/flux-pro/v1/fill').name).toBe('flux-fill');
    expect(falFamily('fal-ai/bytedance/seedream/v4/edit').name).toBe('seedream');
    expect(falFamily('someone/new-model').name).toBe('default');
  });

  it('spell durations and resolutions the family way, never longer than asked', () => {
    const hailuo = falFamily('fal-ai/minimax/hailuo-02/pro/image-to-video');
    expect(falDuration(hailuo, 9)).toBe(6);
    expect(falDuration(hailuo, 4)).toBe(6); // shorter than any it takes: its shortest
    expect(falInput(video({ duration: 12, resolution: '720p' }), hailuo)).toEqual({ prompt: 'p', duration: '10', resolution: '768P', prompt_optimizer: true });
    expect(falInput(video({ duration: 8, generateAudio: true }), falFamily('fal-ai/veo3'))).toEqual({
      prompt: 'p',
      duration: '8s',
      resolution: '720p',
      aspect_ratio: '16:9',
      generate_audio: true,
    });
    expect(falInput(video({ duration: 7 }), falFamily('x/y'))).toMatchObject({ duration: 7 });
  });

  it('list what a family cannot carry by the contract names', () => {
    const all = video({ firstFrameUrl: 'a', lastFrameUrl: 'b', referenceImageUrls: ['c'], referenceVideoUrl: 'd' });
    expect(falIgnored(all, falFamily('fal-ai/veo3'))).toEqual(['last_image_url', 'reference_image_urls', 'reference_video_url']);
    expect(falIgnored(all, falFamily('x/y'))).toEqual([]);
    expect(falIgnored(all, falFamily('fal-ai/veo3.1/first-last-frame-to-video'))).toEqual(['reference_image_urls', 'reference_video_url']);
    expect(falInput(video({ referenceImageUrls: ['c', 'd'], duration: 10 }), falFamily('fal-ai/kling-video/v1.6/pro/elements'))).toEqual({
      prompt: 'p',
      duration: '10',
      aspect_ratio: '16:9',
      input_image_urls: ['c', 'd'],
    });
    expect(falIgnored(image({ negativePrompt: 'n', maskUrl: 'm', imageUrls: ['i'] }), falFamily('fal-ai/flux/dev'))).toEqual(['negative_prompt', 'mask_url']);
    expect(falInput(image({ imageUrls: ['i', 'j'], resolution: '2K' }), falFamily('fal-ai/nano-banana/edit'))).toEqual({
      prompt: 'p',
      num_images: 1,
      aspect_ratio: '1:1',
      resolution: '2K',
      image_urls: ['i', 'j'],
    });
  });
});
