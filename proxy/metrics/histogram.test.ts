import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { KeyedHistogram } from './histogram.js';

describe('KeyedHistogram', () => {
  it("renders the same exposition as prom-client's Histogram for the same observations", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const o = { name: 'h_seconds', help: 'a histogram', labelNames: ['model', 'group'] as const, buckets: [0.01, 0.1, 1, 10] };
    const k = new KeyedHistogram(ours, o);
    const h = new Histogram({ ...o, registers: [theirs] });
    const cases: [string, string, number][] = [
      ['m1', 'g', 0.005],
      ['m1', 'g', 0.1],
      ['m1', 'g', 3],
      ['m1', 'g', 50],
      ['m2', 'g', 0.5],
      ['m2', 'g', Number.NaN],
    ];
    for (const [model, group, v] of cases) {
      k.at([model, group]).observe(v);
      if (Number.isFinite(v)) h.observe({ model, group }, v);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
