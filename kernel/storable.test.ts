import { describe, expect, it } from 'vitest';
import { findUnstorable } from './storable.js';

describe('findUnstorable', () => {
  it('names the first string or key PostgreSQL cannot hold, NUL and unpaired surrogates alike', () => {
    expect(findUnstorable({ a: 'ok', b: ['x', 'y\u0000'] })).toBe('b[1]');
    expect(findUnstorable({ a: { '\ud800': 1 } })).toBe('a.<key>');
    expect(findUnstorable({ p: 'a\udc00b' })).toBe('p');
    expect(findUnstorable({ p: 'emoji 🙂 é' })).toBeUndefined();
  });

  it('walks a body nested 100,000 deep without overflowing the stack', () => {
    const deep = JSON.parse(`${'['.repeat(100_000)}"\\u0000"${']'.repeat(100_000)}`) as unknown;
    expect(findUnstorable({ x: deep })).toMatch(/^x(\[0\])+$/);
  });
});
