import { describe, expect, it } from 'vitest';
import { videoCharge, videoHold, videoUnitPrice } from './pricing.js';

const prices = {
  perSecond: new Map([
    ['480p', 50_000n],
    ['720p', 100_000n],
  ]),
  audioPerSecond: 20_000n,
};

describe('video pricing', () => {
  it('prices a second by resolution, plus audio only when it is generated', () => {
    expect(videoUnitPrice(prices, { resolution: '720p', generateAudio: true })).toEqual({ perSecond: 100_000n, audioPerSecond: 20_000n });
    expect(videoUnitPrice(prices, { resolution: '480p', generateAudio: false })).toEqual({ perSecond: 50_000n, audioPerSecond: 0n });
    expect(videoUnitPrice(prices, { resolution: '1080p', generateAudio: true })).toEqual({ offered: ['480p', '720p'] });
    expect(videoUnitPrice({ perSecond: new Map(), audioPerSecond: 0n }, { resolution: '1080p', generateAudio: true })).toEqual({
      perSecond: 0n,
      audioPerSecond: 0n,
    });
  });

  it('holds the asked duration and charges the actual one, pro rata, never more than held', () => {
    const unit = { perSecond: 100_000n, audioPerSecond: 20_000n };
    expect(videoHold(unit, 8)).toBe(960_000n);
    expect(videoCharge(unit, 8, 6)).toBe(720_000n);
    expect(videoCharge(unit, 5, 3.75)).toBe(450_000n);
    expect(videoCharge({ perSecond: 3n, audioPerSecond: 0n }, 5, 4.001)).toBe(12n); // 12.003 rounded down
    expect(videoCharge(unit, 8, 9.5)).toBe(960_000n); // longer than asked: the hold caps it
    expect(videoCharge(unit, 8, undefined)).toBe(960_000n); // nothing reported: as asked
    expect(videoCharge(unit, 8, Number.NaN)).toBe(960_000n);
    expect(videoCharge(unit, 8, 0)).toBe(0n);
  });
});
