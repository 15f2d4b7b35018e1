import { describe, expect, it } from 'vitest';
import { SeriesTree } from './series.js';

describe('SeriesTree', () => {
  it('gives one series per distinct tuple of values, made once, with the labels in declared order', () => {
    const made: Record<string, string>[] = [];
    const tree = new SeriesTree(['model', 'group', 'kind'] as const, (labels) => {
      made.push(labels);
      return { labels, n: 0 };
    });
    // Values that would collide if joined without a separator, and the same values again.
    const a = tree.at(['ab', 'c', 'chat']);
    const b = tree.at(['a', 'bc', 'chat']);
    const c = tree.at(['ab', 'c', 'image']);
    expect(tree.at(['ab', 'c', 'chat'])).toBe(a);
    expect(tree.at([`${'a'}${'b'}`, 'c', 'chat'])).toBe(a);
    expect(tree.of({ kind: 'chat', group: 'bc', model: 'a' })).toBe(b);
    expect(new Set([a, b, c]).size).toBe(3);
    expect(made).toEqual([
      { model: 'ab', group: 'c', kind: 'chat' },
      { model: 'a', group: 'bc', kind: 'chat' },
      { model: 'ab', group: 'c', kind: 'image' },
    ]);
    expect(Object.keys(made[0]!)).toEqual(['model', 'group', 'kind']);
    expect(tree.all).toEqual([a, b, c]);
    tree.clear();
    expect(tree.all).toEqual([]);
    expect(tree.at(['ab', 'c', 'chat'])).not.toBe(a);
  });
});
