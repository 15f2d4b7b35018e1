import { httpStatus } from '../front/render.js';
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../kernel/errors.js';
import { MemoryCounter, RateLimiter, RedisCounter, type WindowCounter } from './rate-limit.js';

const counters: [string, () => WindowCounter][] = [['memory', () => new MemoryCounter()]];
if (process.env.REDIS_URL) counters.push(['redis', () => new RedisCounter(new Redis(process.env.REDIS_URL!))]);

for (const [name, make] of counters) {
  describe(`rate limits on ${name}`, () => {
    it('admits requestsPerMinute requests, then 429 with retry-after', async () => {
      const limiter = new RateLimiter(make());
      const key = randomBytes(8).toString('hex');
      try {
        for (let i = 0; i < 3; i++) (await limiter.admit(key, { requestsPerMinute: 3 }))();
        const err = await limiter.admit(key, { requestsPerMinute: 3 }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(GatewayError);
        expect(httpStatus(err as GatewayError)).toBe(429);
        expect((err as GatewayError).opts.retryAfterSeconds).toBeGreaterThan(0);
        // another key has its own window
        (await limiter.admit(`${key}x`, { requestsPerMinute: 3 }))();
      } finally {
        await limiter.close();
      }
    });

    it('stops a key whose settled tokens reached tokensPerMinute', async () => {
      const limiter = new RateLimiter(make());
      const key = randomBytes(8).toString('hex');
      try {
        (await limiter.admit(key, { tokensPerMinute: 100 }))();
        await limiter.addTokens(key, 100);
        await expect(limiter.admit(key, { tokensPerMinute: 100 })).rejects.toThrow(/100 tokens per minute/);
      } finally {
        await limiter.close();
      }
    });
  });
}

describe('concurrency limit', () => {
  it('admits concurrentRequests at once and frees a slot on release', async () => {
    const limiter = new RateLimiter();
    const a = await limiter.admit('k', { concurrentRequests: 2 });
    await limiter.admit('k', { concurrentRequests: 2 });
    await expect(limiter.admit('k', { concurrentRequests: 2 })).rejects.toThrow(/2 concurrent requests/);
    a();
    a(); // a second release changes nothing
    await limiter.admit('k', { concurrentRequests: 2 });
    await expect(limiter.admit('k', { concurrentRequests: 2 })).rejects.toThrow(/concurrent/);
  });
});
