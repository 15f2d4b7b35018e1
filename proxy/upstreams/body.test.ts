import { describe, expect, it } from 'vitest';
import { OnceBody, ONCE_FROM_BYTES, upstreamBody } from './body.js';

describe('upstream request bodies', () => {
  it('a large one is given once: its bytes, then nothing', () => {
    const bytes = Buffer.alloc(ONCE_FROM_BYTES, 'x');
    const body = upstreamBody(bytes);
    expect(body).toBeInstanceOf(OnceBody);
    expect(body.length).toBe(ONCE_FROM_BYTES);
    expect([...(body as OnceBody)]).toEqual([bytes]);
    expect([...(body as OnceBody)]).toEqual([]);
  });

  it('a small one stays a Buffer (undici writes it with less work)', () => {
    const bytes = Buffer.alloc(ONCE_FROM_BYTES - 1, 'x');
    expect(upstreamBody(bytes)).toBe(bytes);
  });
});
