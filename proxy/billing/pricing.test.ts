import { describe, expect, it } from 'vitest';
import { effectivePricing } from '../../api/snapshot/compile.js';
import { toMicro } from '../../api/snapshot/money.js';
import { toPrices } from '../config/runtime.js';
import { chatCost, chatHold } from './pricing.js';

const usage = (u: Partial<Parameters<typeof chatCost>[1]>) => ({
  inputTokens: 0,
  cachedInputTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  ...u,
});

// The README's example route: 0.50 / 0.05 / 1.50 credits per million tokens.
const base = { inputPerMillion: '0.50', cachedInputPerMillion: '0.05', outputPerMillion: '1.50' };
const prices = toPrices(effectivePricing(base, toMicro('1')));

describe('chat pricing', () => {
  it('holds estimated input x input price + max output x output price, in micro-credits', () => {
    // 1000 x 0.5 + 4096 x 1.5 micro-credits = 500 + 6144
    expect(chatHold(prices, 1000, 4096)).toBe(6644n);
    expect(chatHold(prices, 0, 0)).toBe(0n);
  });

  it('charges uncached input, cached input and output (reasoning included) at their prices', () => {
    // 1000 input of which 800 cached: 200 x 0.5 + 800 x 0.05 + 300 x 1.5 = 100 + 40 + 450
    expect(chatCost(prices, usage({ inputTokens: 1000, cachedInputTokens: 800, outputTokens: 300, reasoningTokens: 200 }))).toBe(590n);
  });

  it('rounds once per request, up: a call is never free, and never off by more than one micro-credit', () => {
    // 3 input tokens x 0.5 micro = 1.5 micro -> 2
    expect(chatCost(prices, usage({ inputTokens: 3 }))).toBe(2n);
    // 1 output token x 1.5 micro -> 2; 2 tokens = 3 exactly
    expect(chatCost(prices, usage({ outputTokens: 1 }))).toBe(2n);
    expect(chatCost(prices, usage({ outputTokens: 2 }))).toBe(3n);
    expect(chatCost(prices, usage({}))).toBe(0n);
  });

  it('applies the group multiplier and overrides compiled into the snapshot', () => {
    const half = toPrices(effectivePricing(base, toMicro('0.5'), { outputPerMillion: '1' }));
    // input 0.25, cached 0.025 (rounded half up to 0.025), output overridden to 1.00
    expect(chatCost(half, usage({ inputTokens: 4_000_000, outputTokens: 1_000_000 }))).toBe(2_000_000n);
    expect(chatHold(half, 1_000_000, 1_000_000)).toBe(1_250_000n);
  });

  it('falls back to the input price for cached tokens when a route has no cached price, and caps cached at input', () => {
    const noCache = toPrices(effectivePricing({ inputPerMillion: '2', outputPerMillion: '4' }, toMicro('1')));
    expect(chatCost(noCache, usage({ inputTokens: 10, cachedInputTokens: 10 }))).toBe(20n);
    // A provider reporting more cached than input tokens is not paid back.
    expect(chatCost(prices, usage({ inputTokens: 10, cachedInputTokens: 50 }))).toBe(1n);
  });

  it('stays exact for large counts (no floating point)', () => {
    const pricey = toPrices(effectivePricing({ inputPerMillion: '123456.789012', outputPerMillion: '999999.999999' }, toMicro('1')));
    expect(chatCost(pricey, usage({ inputTokens: 2_000_000_000, outputTokens: 1_000_000_000 }))).toBe(246_913_578_024n * 1000n + 999_999_999_999n * 1000n);
  });
});
