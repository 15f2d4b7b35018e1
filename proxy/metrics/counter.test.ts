import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { KeyedCounter } from './counter.js';

describe('KeyedCounter', () => {
  it("renders exactly prom-client's Counter exposition for the same increments", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const o = { name: 'x_total', help: 'x', labelNames: ['model', 'kind'] as const };
    const k = new KeyedCounter(ours, o);
    const c = new Counter({ ...o, registers: [theirs] });
    const incs: [string, string, number][] = [
      ['gpt', 'chat', 1],
      ['gpt', 'chat', 0.25],
      ['claude', 'chat', 3],
      ['gpt', 'image', 2],
    ];
    for (const [model, kind, by] of incs) {
      // Both ways in: by label values in declared order, and by labels.
      if (kind === 'chat') k.at([model, kind]).inc(by);
      else k.inc({ model, kind }, by);
      c.inc({ model, kind }, by);
    }
    // Values and labels name the same series.
    k.inc({ model: 'gpt', kind: 'chat' }, 1);
    c.inc({ model: 'gpt', kind: 'chat' }, 1);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
