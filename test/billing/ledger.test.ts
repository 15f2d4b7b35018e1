import { describe, expect, it } from 'vitest';
import { disposeStore, storeCases } from '../support/stores.js';
import {
  accountState,
  capture,
  checkKeySpend,
  credit,
  hold,
  InsufficientCreditsError,
  keySpent,
  release,
  SpendLimitError,
  topUpLease,
  verifyLedger,
} from '../../proxy/billing/ledger.js';

const C = 1_000_000n; // one credit
const later = () => new Date(Date.now() + 60_000);

for (const c of storeCases({ thread: true })) {
  describe(`ledger on ${c.name}`, () => {
    it('grants, holds, captures and releases; replays change nothing; the rows add up', async () => {
      const store = await c.open();
      try {
        expect(await store.tx((q) => credit(q, { account: 'a', operationId: 'g1', amount: 10n * C }))).toBe(true);
        expect(await store.tx((q) => credit(q, { account: 'a', operationId: 'g1', amount: 10n * C }))).toBe(false);
        expect(await store.tx((q) => hold(q, { account: 'a', holdId: 'h1', amount: 4n * C, expiresAt: later() }))).toBe(true);
        expect(await store.tx((q) => hold(q, { account: 'a', holdId: 'h1', amount: 4n * C, expiresAt: later() }))).toBe(false);
        expect(await accountState(store, 'a')).toEqual({ balance: 10n * C, held: 4n * C });

        // 7 credits are not available while 4 are held.
        await expect(store.tx((q) => hold(q, { account: 'a', holdId: 'h2', amount: 7n * C, expiresAt: later() }))).rejects.toBeInstanceOf(
          InsufficientCreditsError,
        );
        expect(await accountState(store, 'a')).toEqual({ balance: 10n * C, held: 4n * C });

        expect(await store.tx((q) => capture(q, { holdId: 'h1', amount: 1_500_000n }))).toEqual({ captured: 1_500_000n, released: 2_500_000n });
        expect(await store.tx((q) => capture(q, { holdId: 'h1', amount: 1_500_000n }))).toBeNull();
        expect(await accountState(store, 'a')).toEqual({ balance: 8_500_000n, held: 0n });

        await store.tx((q) => hold(q, { account: 'a', holdId: 'h3', amount: 2n * C, expiresAt: later() }));
        expect(await store.tx((q) => release(q, { holdId: 'h3', kind: 'refund' }))).toBe(2n * C);
        expect(await store.tx((q) => release(q, { holdId: 'h3', kind: 'refund' }))).toBeNull();
        expect(await accountState(store, 'a')).toEqual({ balance: 8_500_000n, held: 0n });
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });

    it('lease-style partial captures shrink one hold; a capture above the hold is charged in full', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'b', operationId: 'g', amount: 5n * C }));
        await store.tx((q) => hold(q, { account: 'b', holdId: 'lease', amount: 3n * C, expiresAt: later(), purpose: 'lease', owner: 'replica-1' }));
        await store.tx((q) => capture(q, { holdId: 'lease', operationId: 'r1', amount: C, close: false }));
        await store.tx((q) => capture(q, { holdId: 'lease', operationId: 'r2', amount: C, close: false }));
        await store.tx((q) => capture(q, { holdId: 'lease', operationId: 'r2', amount: C, close: false })); // replay
        expect(await accountState(store, 'b')).toEqual({ balance: 3n * C, held: C });
        await store.tx((q) => capture(q, { holdId: 'lease', operationId: 'r3', amount: 2n * C, close: false }));
        expect(await accountState(store, 'b')).toEqual({ balance: C, held: 0n });
        expect(await store.tx((q) => release(q, { holdId: 'lease' }))).toBe(0n);
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });

    it('a lease is taken and grown by hold rows under the same check; a replay writes nothing; a released lease is taken anew', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'd', operationId: 'g', amount: 5n * C }));
        const lease = { account: 'd', expiresAt: later(), owner: 'r', slice: 0n };
        const take = (leaseId: string | undefined, topUpId: string, newLeaseId: string, shortfall: bigint) =>
          topUpLease(store, { ...lease, grow: leaseId ? { leaseId, topUpId } : undefined, newLeaseId, shortfall });
        expect(await take(undefined, '-', 'L', C)).toEqual({ outcome: 'taken', free: 5n * C, took: C });
        expect(await take('L', 'L:topup:1', 'L2', 2n * C)).toEqual({ outcome: 'grown', free: 4n * C, took: 2n * C });
        expect(await take('L', 'L:topup:1', 'L2', 2n * C)).toEqual({ outcome: 'grown', free: 2n * C, took: 2n * C });
        expect(await accountState(store, 'd')).toEqual({ balance: 5n * C, held: 3n * C });
        expect(await take('L', 'L:topup:2', 'L2', 3n * C)).toEqual({ outcome: 'refused', free: 2n * C, took: 0n });
        expect(await accountState(store, 'd')).toEqual({ balance: 5n * C, held: 3n * C });
        await store.tx((q) => capture(q, { holdId: 'L', operationId: 'c1', amount: C, close: false }));
        expect(await verifyLedger(store)).toEqual([]);
        expect(await store.tx((q) => release(q, { holdId: 'L' }))).toBe(2n * C);
        expect(await take('L', 'L:topup:3', 'L2', C)).toEqual({ outcome: 'taken', free: 4n * C, took: C });
        expect(await accountState(store, 'd')).toEqual({ balance: 4n * C, held: C });
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });

    it("a key's open holds and captures count towards its spend limit", async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'e', operationId: 'g', amount: 10n * C }));
        const submit = (id: string, amount: bigint) =>
          store.tx(async (q) => {
            await checkKeySpend(q, 'kh', amount, 3n * C);
            await hold(q, { account: 'e', holdId: id, amount, expiresAt: later(), purpose: 'task', keyHash: 'kh' });
          });
        await submit('t1', 2n * C);
        await expect(submit('t2', 2n * C)).rejects.toBeInstanceOf(SpendLimitError);
        await store.tx((q) => capture(q, { holdId: 't1', amount: C }));
        expect(await keySpent(store, 'kh')).toBe(C);
        await submit('t3', 2n * C);
        await expect(submit('t4', 1n)).rejects.toMatchObject({ code: 'spend_limit_reached' });
        expect(await accountState(store, 'e')).toEqual({ balance: 9n * C, held: 2n * C });
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });

    it('concurrent holds never reserve more than the balance', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'c', operationId: 'g', amount: 10n * C }));
        const results = await Promise.allSettled(
          Array.from({ length: 40 }, (_, i) => store.tx((q) => hold(q, { account: 'c', holdId: `h${i}`, amount: C, expiresAt: later() }))),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(10);
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(InsufficientCreditsError);
        expect(await accountState(store, 'c')).toEqual({ balance: 10n * C, held: 10n * C });
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });
  });
}
