import { expect } from 'vitest';
import type { Billing, ChatCharge, ChatQuote, ChatSettlement } from '../../proxy/billing/types.js';
import type { Simulator } from '../../simulator/index.js';

/**
 * A Billing that records what the chat path hands it: every hold's quote and every settle()
 * call (so tests can check the usage and that each request settles exactly once). `settleDelayMs`
 * makes settle slow, to show that the last byte waits for it.
 */
export class RecordingBilling {
  readonly quotes = new Map<string, ChatQuote>();
  readonly settlements = new Map<string, { outcome: ChatSettlement; at: number }[]>();
  settleDelayMs = 0;

  readonly factory = (): Billing => ({
    holdChat: async (quote: ChatQuote): Promise<ChatCharge> => {
      this.quotes.set(quote.requestId, quote);
      return {
        heldMicro: 0n,
        settle: async (outcome) => {
          if (this.settleDelayMs) await new Promise((r) => setTimeout(r, this.settleDelayMs));
          const list = this.settlements.get(quote.requestId) ?? [];
          // settle() is idempotent for the real ledger; recording each call shows there is one.
          list.push({ outcome: structuredClone(outcome), at: Date.now() });
          this.settlements.set(quote.requestId, list);
        },
      };
    },
    close: async () => {},
  });

  /** The one settlement of a request; throws when there is none or more than one. */
  settled(requestId: string): ChatSettlement {
    const list = this.settlements.get(requestId) ?? [];
    if (list.length !== 1) throw new Error(`request ${requestId} settled ${list.length} times`);
    return list[0]!.outcome;
  }

  async waitSettled(requestId: string, ms = 5000): Promise<ChatSettlement> {
    const end = performance.now() + ms;
    while (!this.settlements.has(requestId)) {
      if (performance.now() > end) throw new Error(`request ${requestId} never settled`);
      await new Promise((r) => setTimeout(r, 10));
    }
    // A second settle would come right after the first; give it the chance to show up.
    await new Promise((r) => setTimeout(r, 30));
    return this.settled(requestId);
  }
}

let n = 0;
/** A unique request id (sent as x-request-id, which the gateway adopts) that doubles as a marker. */
export const rid = (tag: string) => `${tag}-${process.pid}-${Date.now().toString(36)}-${++n}`;

/** The one upstream request the simulator recorded for a gateway request id. */
export function upstreamOf(sim: Simulator, requestId: string) {
  const rec = sim.recorder.all().filter((r) => r.headers['x-request-id'] === requestId);
  expect(rec).toHaveLength(1);
  return rec[0]!;
}

/** SDK request options that set the request id, so a test can find its upstream request and settlement. */
export const withRequestId = (id: string) => ({ headers: { 'x-request-id': id } });
