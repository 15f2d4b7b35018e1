import type { Redis } from 'ioredis';
import { GatewayError } from '../../kernel/errors.js';

export interface Limits {
  requestsPerMinute?: number;
  tokensPerMinute?: number;
  concurrentRequests?: number;
}

/** Fixed one-minute windows: a counter per key and minute. */
export interface WindowCounter {
  /** Adds n to the key's counter in the current window and returns the new total. */
  add(key: string, n: number, windowMs: number): Promise<number>;
  get(key: string, windowMs: number): Promise<number>;
  close(): Promise<void>;
}

const WINDOW_MS = 60_000;

export class MemoryCounter implements WindowCounter {
  private readonly counts = new Map<string, { window: number; n: number }>();
  add(key: string, n: number, windowMs: number): Promise<number> {
    const window = Math.floor(Date.now() / windowMs);
    const c = this.counts.get(key);
    if (!c || c.window !== window) {
      if (this.counts.size > 100_000) this.counts.clear(); // old windows of idle keys
      this.counts.set(key, { window, n });
      return Promise.resolve(n);
    }
    c.n += n;
    return Promise.resolve(c.n);
  }
  get(key: string, windowMs: number): Promise<number> {
    const c = this.counts.get(key);
    return Promise.resolve(c && c.window === Math.floor(Date.now() / windowMs) ? c.n : 0);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Shared by every replica: INCRBY and PEXPIRE in one script, so a counter never outlives its window. */
export class RedisCounter implements WindowCounter {
  constructor(private readonly redis: Redis) {}
  private slot(key: string, windowMs: number): string {
    return `tollgate:rl:${key}:${Math.floor(Date.now() / windowMs)}`;
  }
  async add(key: string, n: number, windowMs: number): Promise<number> {
    const total = await this.redis.eval(
      "local v = redis.call('INCRBY', KEYS[1], ARGV[1]); if v == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end; return v",
      1,
      this.slot(key, windowMs),
      n,
      windowMs * 2,
    );
    return Number(total);
  }
  async get(key: string, windowMs: number): Promise<number> {
    return Number((await this.redis.get(this.slot(key, windowMs))) ?? 0);
  }
  close(): Promise<void> {
    this.redis.disconnect();
    return Promise.resolve();
  }
}

/**
 * Group rate limits, applied per key: requests and tokens per minute (shared through Redis when
 * configured, else per replica) and requests in flight (per replica).
 */
export class RateLimiter {
  private readonly inflight = new Map<string, number>();

  constructor(private readonly counter: WindowCounter = new MemoryCounter()) {}

  /** Admits a request or throws 429 with retry-after; call the returned release when it ends. */
  async admit(keyHash: string, limits: Limits): Promise<() => void> {
    const retryAfterSeconds = Math.max(1, Math.ceil((WINDOW_MS - (Date.now() % WINDOW_MS)) / 1000));
    if (limits.tokensPerMinute !== undefined) {
      const used = await this.counter.get(`t:${keyHash}`, WINDOW_MS);
      if (used >= limits.tokensPerMinute) {
        throw new GatewayError('rate_limited', `rate limit: ${limits.tokensPerMinute} tokens per minute for this key`, { retryAfterSeconds });
      }
    }
    if (limits.requestsPerMinute !== undefined) {
      const n = await this.counter.add(`r:${keyHash}`, 1, WINDOW_MS);
      if (n > limits.requestsPerMinute) {
        throw new GatewayError('rate_limited', `rate limit: ${limits.requestsPerMinute} requests per minute for this key`, { retryAfterSeconds });
      }
    }
    if (limits.concurrentRequests === undefined) return () => {};
    const active = this.inflight.get(keyHash) ?? 0;
    if (active >= limits.concurrentRequests) {
      throw new GatewayError('rate_limited', `rate limit: ${limits.concurrentRequests} concurrent requests for this key`, { retryAfterSeconds: 1 });
    }
    this.inflight.set(keyHash, active + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inflight.get(keyHash) ?? 1) - 1;
      if (left <= 0) this.inflight.delete(keyHash);
      else this.inflight.set(keyHash, left);
    };
  }

  /** Tokens a finished request used, for tokensPerMinute. */
  async addTokens(keyHash: string, tokens: number): Promise<void> {
    if (tokens > 0) await this.counter.add(`t:${keyHash}`, tokens, WINDOW_MS);
  }

  close(): Promise<void> {
    return this.counter.close();
  }
}
