import { describe, expect, it } from 'vitest';
import { retryAfterMs } from './retry-after.js';
import { cooldownMs } from './select.js';

describe("an upstream's retry-after", () => {
  const now = Date.parse('2026-12-04T02:00:00Z');

  it('reads delay-seconds, and retry-after-ms before it', () => {
    expect(retryAfterMs({ 'retry-after': '7' }, now)).toBe(7000);
    expect(retryAfterMs({ 'retry-after': ' 1.5 ' }, now)).toBe(1500);
    expect(retryAfterMs({ 'retry-after-ms': '250', 'retry-after': '1' }, now)).toBe(250);
    expect(retryAfterMs({ 'retry-after': ['3', '9'] }, now)).toBe(3000);
  });

  it('reads an HTTP-date as the time left until it', () => {
    expect(retryAfterMs({ 'retry-after': 'Fri, 04 Dec 2026 02:00:30 GMT' }, now)).toBe(30_000);
    expect(retryAfterMs({ 'retry-after': 'Fri, 04 Dec 2026 01:59:00 GMT' }, now)).toBeUndefined(); // past
  });

  it('is undefined for nothing readable', () => {
    for (const h of [{}, { 'retry-after': '' }, { 'retry-after': '0' }, { 'retry-after': '-3' }, { 'retry-after': 'soon' }, { 'retry-after-ms': 'x' }])
      expect(retryAfterMs(h, now)).toBeUndefined();
  });

  it("sets a 429's cooldown of its backend, between 1 and 60 s (5 s when it says nothing)", () => {
    const cool = (h: Record<string, string>) => cooldownMs('status', 429, retryAfterMs(h, now));
    expect(cool({ 'retry-after': 'Fri, 04 Dec 2026 02:00:30 GMT' })).toBe(30_000);
    expect(cool({ 'retry-after-ms': '200' })).toBe(1_000);
    expect(cool({ 'retry-after': '3600' })).toBe(60_000);
    expect(cool({})).toBe(5_000);
  });
});
