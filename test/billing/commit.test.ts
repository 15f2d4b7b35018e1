import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { disposeStore, storeCases } from '../support/stores.js';
import { commitLine, commitRecord, writeCaptures, type CaptureItem } from '../../proxy/billing/commit.js';
import { accountState, credit, hold, keySpent, release, verifyLedger } from '../../proxy/billing/ledger.js';

const later = () => new Date(Date.now() + 60_000);
let n = 0;
const item = (credits: bigint, leaseId: string | undefined, keyHash = 'k1'): CaptureItem => ({
  operationId: `op-${++n}`,
  leaseId,
  record: {
    requestId: `r-${n}`,
    keyName: 'key',
    keyHash,
    account: 'a',
    group: 'g',
    model: 'm',
    upstreamModel: 'u',
    protocol: 'messages',
    usage: { inputTokens: 1, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0 },
    credits,
    usageSource: 'reported',
    status: 'ok',
    httpStatus: 200,
    latencyMs: 1,
  },
});

describe("a capture's journal line", () => {
  it('is JSON.stringify of its record, whatever the names, ids and numbers hold', () => {
    // Names and ids as anything a config or a client could put there: quotes, backslashes,
    // control characters, lone surrogates, any Unicode. The operation id as the engine makes it.
    const text = fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom('"', '\\', '\n', '\u0000', '\ud800', 'a"b\\c', 'plain-name'));
    const count = fc.oneof(fc.nat(), fc.integer(), fc.constantFrom(Number.NaN, Infinity, -0, 1e21));
    const item = fc.record({
      operationId: fc.tuple(fc.base64String(), fc.nat()).map(([p, k]) => `chat:${p.replace(/[+/=]/g, '_')}.${k.toString(36)}`),
      leaseId: fc.option(text, { nil: undefined }),
      record: fc.record(
        {
          requestId: text,
          keyName: text,
          keyHash: text,
          account: text,
          group: text,
          model: text,
          upstreamModel: text,
          protocol: fc.constantFrom('chat-completions' as const, 'responses' as const, 'messages' as const),
          usage: fc.record({ inputTokens: count, cachedInputTokens: count, cacheWriteTokens: count, outputTokens: count, reasoningTokens: count }),
          credits: fc.bigInt(),
          usageSource: fc.constantFrom('reported' as const, 'estimated' as const),
          status: fc.constantFrom('ok', 'upstream_error', 'cancelled', 'failed'),
          httpStatus: fc.integer({ min: 0, max: 999 }),
          latencyMs: fc.oneof(fc.double(), fc.double({ min: 0, max: 1e6 })),
          ttftMs: fc.oneof(fc.double(), fc.double({ min: 0, max: 1e6 })),
        },
        {
          requiredKeys: [
            'requestId',
            'keyName',
            'keyHash',
            'account',
            'group',
            'model',
            'upstreamModel',
            'protocol',
            'usage',
            'credits',
            'usageSource',
            'status',
            'httpStatus',
            'latencyMs',
          ],
        },
      ),
    });
    fc.assert(
      fc.property(item, (i) => {
        expect(commitLine(i as CaptureItem)).toBe(JSON.stringify(commitRecord(i as CaptureItem)));
      }),
      { numRuns: 2_000 },
    );
  });
});

for (const c of storeCases({ thread: true })) {
  describe(`group commit on ${c.name}`, () => {
    it('writes one capture per lease for the sum of its requests, settles the lease with it, charges any excess to the balance, and writes a record for every request', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'a', operationId: 'g', amount: 1000n }));
        await store.tx((q) => hold(q, { account: 'a', holdId: 'L', amount: 100n, expiresAt: later(), purpose: 'lease', owner: 'me' }));
        const batch = [item(60n, 'L'), item(0n, 'L'), item(70n, 'L', 'k2'), item(30n, 'L')];
        const out = await writeCaptures(store, batch);
        expect(out.applied).toBe(4);
        expect(out.lostLeases.size).toBe(0);
        // 160 charged: the lease's 100 settled, 60 charged beyond it.
        expect(await accountState(store, 'a')).toEqual({ balance: 840n, held: 0n });
        const rows = await store.query<{ delta_balance: unknown; delta_held: unknown; hold_id: string; meta: { requests: number } }>(
          "SELECT delta_balance, delta_held, hold_id, meta FROM ledger WHERE kind = 'capture' ORDER BY id",
        );
        expect(rows.rows.map((r) => [BigInt(r.delta_balance as string), BigInt(r.delta_held as string), r.hold_id, r.meta.requests])).toEqual([
          [-160n, -100n, 'L', 3],
        ]);
        expect(await keySpent(store, 'k1')).toBe(90n);
        expect(await keySpent(store, 'k2')).toBe(70n);
        const recs = await store.query('SELECT 1 FROM usage_records');
        expect(recs.rows).toHaveLength(4);
        expect(await verifyLedger(store)).toEqual([]);

        // Replayed (a retried commit that had landed), alone or with a new request: only the new one counts.
        const again = await writeCaptures(store, [...batch, item(7n, undefined)]);
        expect(again.applied).toBe(1);
        expect(await accountState(store, 'a')).toEqual({ balance: 833n, held: 0n });
        expect((await store.query('SELECT 1 FROM usage_records')).rows).toHaveLength(5);
        expect(await keySpent(store, 'k1')).toBe(97n);
        expect(await verifyLedger(store)).toEqual([]);

        // The sweeper took the lease: later captures charge the balance and report it lost.
        await store.tx((q) => release(q, { holdId: 'L' }));
        const late = await writeCaptures(store, [item(5n, 'L')]);
        expect([...late.lostLeases]).toEqual(['L']);
        expect(await accountState(store, 'a')).toEqual({ balance: 828n, held: 0n });
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });
  });
}
