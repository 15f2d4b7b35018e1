import { describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../kernel/log.js';
import { accountState, credit, InsufficientCreditsError, release, verifyLedger } from '../../proxy/billing/ledger.js';
import { Leases } from '../../proxy/billing/leases.js';
import { billingSettings } from '../../proxy/billing/settings.js';
import type { Queryable } from '../../proxy/store/index.js';
import { disposeStore, storeCases } from '../support/stores.js';

const C = 1_000_000n; // one credit

function recordingLog(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const log: Logger & { warnings: string[] } = {
    warnings,
    info() {},
    warn: (msg) => void warnings.push(msg),
    error() {},
    child: () => log,
  };
  return log;
}

async function ledgerRows(q: Queryable, account: string): Promise<number> {
  return (await q.query('SELECT 1 FROM ledger WHERE account = $1', [account])).rows.length;
}

// A replica takes and grows its lease on an account in one statement (migration 041); these are
// the outcomes the transaction of separate statements had, each with the books exact.
for (const c of storeCases({ thread: true })) {
  describe(`a replica's lease on ${c.name}`, () => {
    it('is taken, grown, and taken anew after a sweeper released it behind its back', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'a', operationId: 'g', amount: 100n * C }));
        const log = recordingLog();
        const leases = new Leases(store, log, billingSettings(), 'r1', undefined);
        const acct = leases.of('a');

        await leases.topUp(acct, C);
        // The hold and a slice of eight such holds.
        expect(acct).toMatchObject({ leaseId: 'lease:r1:a:1', remaining: 9n * C, generation: 1 });
        expect(await accountState(store, 'a')).toEqual({ balance: 100n * C, held: 9n * C });

        // Everything in flight: the next request does not fit. The slice is twice what is in
        // flight with it (2 x 10) when that is more than eight holds, plus what it lacks.
        acct.reserved = acct.remaining;
        await leases.topUp(acct, C);
        expect(acct).toMatchObject({ leaseId: 'lease:r1:a:1', remaining: 30n * C, topups: 1 });
        expect(await accountState(store, 'a')).toEqual({ balance: 100n * C, held: 30n * C });
        expect(await verifyLedger(store)).toEqual([]);

        // Another replica's sweeper releases it (this one could not renew it in time): the next
        // top-up takes a new lease, as much as half of what is free beyond what it lacks.
        await store.tx((q) => release(q, { holdId: 'lease:r1:a:1' }));
        acct.reserved = acct.remaining;
        await leases.topUp(acct, C);
        // In flight then: 30 + 1; the slice 62 is more than half of the 99 free beyond the 1.
        expect(acct).toMatchObject({ leaseId: 'lease:r1:a:2', generation: 2, topups: 0, remaining: C + 49_500_000n });
        expect(log.warnings).toEqual(['billing lease was released while in use; a new one was taken']);
        expect(await accountState(store, 'a')).toEqual({ balance: 100n * C, held: C + 49_500_000n });
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });

    it('takes at most half of what is free beyond what it lacks, and writes nothing when the account cannot cover it', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'c', operationId: 'g-c', amount: 10n * C }));
        await store.tx((q) => credit(q, { account: 'b', operationId: 'g-b', amount: 2n * C }));
        const leases = new Leases(store, recordingLog(), billingSettings(), 'r1', undefined);

        const cAcct = leases.of('c');
        await leases.topUp(cAcct, 2n * C);
        // Eight holds would be 16 credits; half of the 8 free beyond the hold is 4.
        expect(cAcct.remaining).toBe(6n * C);
        expect(await accountState(store, 'c')).toEqual({ balance: 10n * C, held: 6n * C });

        const bAcct = leases.of('b');
        await expect(leases.topUp(bAcct, 3n * C)).rejects.toBeInstanceOf(InsufficientCreditsError);
        expect(bAcct).toMatchObject({ leaseId: undefined, remaining: 0n, refused: { free: 2n * C } });
        expect(await accountState(store, 'b')).toEqual({ balance: 2n * C, held: 0n });
        expect(await ledgerRows(store, 'b')).toBe(1);
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });

    it("remembers a refusal for refusalMemoryMs on the process's own clock: a grant is seen once that has passed, though the wall clock stepped back", async () => {
      const store = await c.open();
      const settings = { ...billingSettings(), refusalMemoryMs: 1_000 };
      try {
        await store.tx((q) => credit(q, { account: 'd', operationId: 'g-d', amount: 2n * C }));
        // The store as the leases see it, counting what they ask of it.
        let asked = 0;
        const counted = new Proxy(store, {
          get: (target, prop, receiver) => {
            const v = Reflect.get(target, prop, receiver) as unknown;
            if ((prop !== 'query' && prop !== 'tx') || typeof v !== 'function') return v;
            return (...args: unknown[]) => (asked++, (v as (...a: unknown[]) => unknown).apply(target, args));
          },
        });
        const leases = new Leases(counted, recordingLog(), settings, 'r1', undefined);
        const acct = leases.of('d');
        await expect(leases.topUp(acct, 3n * C)).rejects.toBeInstanceOf(InsufficientCreditsError);
        // At once again: refused from memory, the store not asked.
        asked = 0;
        await expect(leases.topUp(acct, 3n * C)).rejects.toBeInstanceOf(InsufficientCreditsError);
        expect(asked).toBe(0);
        await store.tx((q) => credit(q, { account: 'd', operationId: 'g-d2', amount: 10n * C }));

        // The wall clock steps a minute back (an NTP correction); the memory still ends on time.
        const stepped = Date.now() - 60_000;
        const now = vi.spyOn(Date, 'now').mockImplementation(() => stepped);
        try {
          await new Promise((r) => setTimeout(r, settings.refusalMemoryMs + 50));
          await leases.topUp(acct, 3n * C);
        } finally {
          now.mockRestore();
        }
        expect(acct).toMatchObject({ leaseId: 'lease:r1:d:1', refused: undefined });
        expect((await accountState(store, 'd')).held).toBe(acct.remaining);
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });

    it('handed back when idle, admits nothing against itself while the release is being written; the next request takes a new lease', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'e', operationId: 'g-e', amount: 100n * C }));
        let releasing: () => void = () => {};
        let release_: Promise<void> | undefined;
        const slow = new Proxy(store, {
          get(target, prop, receiver) {
            const v = Reflect.get(target, prop, receiver) as unknown;
            if (prop !== 'tx' || typeof v !== 'function') return v;
            return async (...args: unknown[]) => {
              if (release_) await release_;
              return (v as (...a: unknown[]) => unknown).apply(target, args);
            };
          },
        });
        const leases = new Leases(slow, recordingLog(), { ...billingSettings(), idleMs: 0 }, 'r1', undefined);
        const acct = leases.of('e');
        await leases.topUp(acct, C);
        expect(acct).toMatchObject({ leaseId: 'lease:r1:e:1', remaining: 9n * C });

        release_ = new Promise((r) => (releasing = r));
        const upkeep = leases.upkeep();
        await new Promise((r) => setTimeout(r, 20));
        // A request arriving now finds nothing to reserve from, and tops up behind the hand-back.
        expect(acct).toMatchObject({ leaseId: undefined, remaining: 0n });
        acct.inflight++; // admitted, as holdChat does before it tops up
        const topUp = leases.topUp(acct, C);
        releasing();
        release_ = undefined;
        await upkeep;
        await topUp;
        expect(acct).toMatchObject({ leaseId: 'lease:r1:e:2', remaining: 9n * C });
        expect(leases.of('e')).toBe(acct);
        expect(await accountState(store, 'e')).toEqual({ balance: 100n * C, held: 9n * C });
        expect(await verifyLedger(store)).toEqual([]);
      } finally {
        await disposeStore(store);
      }
    });
  });
}
