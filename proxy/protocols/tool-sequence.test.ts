import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { IrStreamPart } from '../ir/chat.js';
import { ToolCallSequencer } from './tool-sequence.js';

/** Parallel calls, each a start and its argument pieces, interleaved in any order that keeps each call's own order. */
const interleaved = fc.array(fc.array(fc.string({ minLength: 1, maxLength: 4 }), { maxLength: 5 }), { minLength: 1, maxLength: 4 }).chain((calls) => {
  const queues = calls.map((pieces, i): IrStreamPart[] => [
    { type: 'tool_call_start', index: i, id: `c${i}`, name: `f${i}` },
    ...pieces.map((arguments_): IrStreamPart => ({ type: 'tool_call_delta', index: i, arguments: arguments_ })),
  ]);
  const total = queues.reduce((n, q) => n + q.length, 0);
  return fc.array(fc.nat(), { minLength: total, maxLength: total }).map((picks) => {
    const left = queues.map((q) => [...q]);
    const order: IrStreamPart[] = [];
    for (const pick of picks) {
      const open = left.filter((q) => q.length);
      order.push(open[pick % open.length]!.shift()!);
    }
    return { queues, order };
  });
});

describe('ToolCallSequencer', () => {
  it('puts interleaved calls one after another, every part kept, the first streaming as it comes', () => {
    fc.assert(
      fc.property(interleaved, ({ queues, order }) => {
        const s = new ToolCallSequencer();
        const out: IrStreamPart[] = [];
        for (const p of order) out.push(...s.push(p));
        out.push(
          ...s.push({
            type: 'finish',
            finish: { reason: 'tool_calls', raw: 'tool_calls' },
            usage: { inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 },
          }),
        );
        const calls = out.filter((p) => p.type !== 'finish') as { index: number }[];
        // Contiguous: once another call's part comes, a call has no more parts.
        const seen: number[] = [];
        for (const p of calls) if (seen.at(-1) !== p.index) seen.push(p.index);
        expect(new Set(seen).size).toBe(seen.length);
        // Each call whole and in its order, the calls in the order they started.
        expect(seen).toEqual(order.filter((p) => p.type === 'tool_call_start').map((p) => (p as { index: number }).index));
        for (const [i, q] of queues.entries()) expect(out.filter((p) => (p as { index?: number }).index === i)).toEqual(q);
        expect(out.at(-1)!.type).toBe('finish');
      }),
    );
  });

  it('sends the open call as it comes and a later one once the open one has ended', () => {
    const s = new ToolCallSequencer();
    const start = (i: number): IrStreamPart => ({ type: 'tool_call_start', index: i, id: `c${i}`, name: 'f' });
    const delta = (i: number): IrStreamPart => ({ type: 'tool_call_delta', index: i, arguments: `${i}` });
    expect(s.push(start(0))).toEqual([start(0)]);
    expect(s.push(start(1))).toEqual([]);
    expect(s.push(delta(0))).toEqual([delta(0)]);
    expect(s.push(delta(1))).toEqual([]);
    expect(s.push({ type: 'block_end', index: 0 })).toEqual([{ type: 'block_end', index: 0 }, start(1), delta(1)]);
    expect(s.push(delta(1))).toEqual([delta(1)]);
    // After text, a new call is not held behind the one before it.
    expect(s.push({ type: 'text', index: 5, delta: 'x' })).toEqual([{ type: 'text', index: 5, delta: 'x' }]);
    expect(s.push(start(2))).toEqual([start(2)]);
  });
});
