import { httpStatus } from '../../front/render.js';
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../../kernel/errors.js';
import { fitVideoRequest } from './capabilities.js';
import type { VideoRequest } from './request.js';

const I = 'https://media.example.com/a.png';
const req = (r: Partial<VideoRequest> = {}): VideoRequest => ({
  model: 'm',
  prompt: 'p',
  mode: 'text-to-video',
  aspectRatio: '16:9',
  referenceImageUrls: [],
  ignored: [],
  ...r,
});
const status = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return [httpStatus(err as GatewayError), (err as GatewayError).opts.param];
  }
  return undefined;
};

describe('fitVideoRequest', () => {
  it('fills the defaults within what the model offers', () => {
    expect(fitVideoRequest(req(), 'm', { audio: true }, []).job).toMatchObject({ duration: 5, resolution: '720p', generateAudio: true });
    expect(fitVideoRequest(req(), 'm', { resolutions: ['1080p'], minDuration: 8, maxDuration: 12 }, []).job).toMatchObject({
      duration: 8,
      resolution: '1080p',
      generateAudio: false,
    });
    expect(fitVideoRequest(req(), 'm', {}, ['480p']).job.resolution).toBe('480p'); // only priced at 480p
    expect(fitVideoRequest(req({ generateAudio: false }), 'm', { audio: true }, []).job.generateAudio).toBe(false);
  });

  it('refuses a resolution the model does not offer (400) and a duration outside its range (404)', () => {
    expect(status(() => fitVideoRequest(req({ resolution: '1080p' }), 'm', { resolutions: ['720p'] }, []))).toEqual([400, 'resolution']);
    expect(status(() => fitVideoRequest(req({ duration: 4 }), 'm', { minDuration: 5 }, []))).toEqual([404, 'duration']);
    expect(status(() => fitVideoRequest(req({ duration: 601 }), 'm', {}, []))).toEqual([404, 'duration']);
    expect(status(() => fitVideoRequest(req({ duration: 600 }), 'm', {}, []))).toBeUndefined();
  });

  it('drops the inputs the model does not take and lists them, keeping the mode asked', () => {
    const { job, ignored } = fitVideoRequest(
      req({ mode: 'video-to-video', firstFrameUrl: I, lastFrameUrl: I, referenceImageUrls: [I], referenceVideoUrl: I, generateAudio: true, ignored: ['seed'] }),
      'm',
      { firstFrame: true },
      [],
    );
    expect(job).toEqual({
      kind: 'video',
      mode: 'video-to-video',
      prompt: 'p',
      duration: 5,
      resolution: '720p',
      aspectRatio: '16:9',
      generateAudio: false,
      firstFrameUrl: I,
      referenceImageUrls: [],
    });
    expect(ignored).toEqual(['generate_audio', 'last_image_url', 'reference_image_urls', 'reference_video_url', 'seed']);
  });
});
