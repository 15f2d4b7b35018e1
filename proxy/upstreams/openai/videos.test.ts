import { describe, expect, it } from 'vitest';
import { openaiSeconds, openaiVideoSize } from './videos.js';

describe('OpenAI video parameters', () => {
  it('sends Sora the longest duration it takes that is not above the asked one', () => {
    expect([4, 5, 7, 8, 10, 12, 20].map((d) => openaiSeconds('sora-2', d))).toEqual([4, 4, 4, 8, 8, 12, 12]);
    expect(openaiSeconds('sora-2-pro-2025-10-06', 9)).toBe(8);
    expect(openaiSeconds('video-sim', 7)).toBe(7); // other models: as asked
  });

  it("maps resolution and ratio onto Sora's sizes, and onto pixels for other models", () => {
    expect(openaiVideoSize('sora-2', '720p', '16:9')).toBe('1280x720');
    expect(openaiVideoSize('sora-2', '1080p', '9:16')).toBe('720x1280');
    expect(openaiVideoSize('sora-2-pro', '1080p', '16:9')).toBe('1792x1024');
    expect(openaiVideoSize('sora-2-pro', '720p', '9:16')).toBe('720x1280');
    expect(openaiVideoSize('video-sim', '480p', '9:16')).toBe('480x854');
    expect(openaiVideoSize('video-sim', '1080p', '4:3')).toBe('1440x1080');
    expect(openaiVideoSize('video-sim', '720p', '1:1')).toBe('720x720');
  });
});
