import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chatCost, type ChatSettlement } from '../billing/index.js';
import { chatHold } from '../billing/pricing.js';
import type { Prices } from '../config/runtime.js';
import type { RequestContext } from '../http/context.js';
import { ChatExchange } from './exchange.js';

const PRICES: Prices = {
  inputPerMillion: 3_000_000n,
  cachedInputPerMillion: 300_000n,
  outputPerMillion: 15_000_000n,
  perImage: new Map(),
  perSecond: new Map(),
  audioPerSecond: 0n,
};

/** A stream that ended before its usage (the client left, the upstream cut it): what is charged. */
async function settledAfter(outputBytes: number, reportedOutput: number | null, cap: number, inputTokens: number): Promise<ChatSettlement> {
  let settled: ChatSettlement | undefined;
  const ctx = { startedAt: process.hrtime.bigint(), requestId: 'r', log: { error() {} } } as unknown as RequestContext;
  const x = new ChatExchange(ctx, { heldMicro: 0n, settle: async (o) => void (settled = o) }, inputTokens, cap, 'm');
  x.sent('m');
  const reported =
    reportedOutput === null ? null : { inputTokens, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: reportedOutput, reasoningTokens: 0 };
  x.usage(reported, false, outputBytes);
  x.cancelled();
  await x.close();
  return settled!;
}

describe('the charge of an answer cut before its usage', () => {
  it('is estimated from the bytes seen, but never above the output cap the upstream was sent', async () => {
    expect((await settledAfter(400, null, 2000, 10)).usage!.outputTokens).toBe(100);
    // 10,184 bytes of short words: 2,546 tokens at 4 bytes each, from an upstream capped at 2,000
    expect((await settledAfter(10_184, null, 2000, 10)).usage!.outputTokens).toBe(2000);
    expect((await settledAfter(10_184, 1500, 2000, 10)).usage!.outputTokens).toBe(2000);
  });

  it('costs at most what was held, whatever was seen', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.option(fc.integer({ min: 0, max: 4096 })),
        fc.integer({ min: 1, max: 4096 }),
        fc.integer({ min: 0, max: 100_000 }),
        async (bytes, reported, cap, input) => {
          fc.pre(reported === null || reported <= cap);
          const s = await settledAfter(bytes, reported, cap, input);
          expect(chatCost(PRICES, s.usage!)).toBeLessThanOrEqual(chatHold(PRICES, input, cap));
        },
      ),
    );
  });
});
