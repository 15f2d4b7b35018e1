import { describe, expect, it } from 'vitest';
import { SpendLimits } from '../../proxy/billing/spend-limits.js';
import type { Store } from '../../proxy/store/index.js';
import { disposeStore, storeCases, type StoreCase } from '../support/stores.js';

interface Known {
  all: string[];
  limits: SpendLimits;
  /** What other replicas charged: every key's spend in the store set to `amount`. */
  spendAll(amount: number): Promise<unknown>;
  /** The keys whose spend this replica has read as `amount`. */
  fresh(amount: bigint): string[];
}

/** A replica that knows `n` limited keys (their spend read once, all 0), on a store of its own. */
async function withKnownKeys(c: StoreCase, n: number, fn: (k: Known) => Promise<void>): Promise<void> {
  const store: Store = await c.open();
  try {
    const all = Array.from({ length: n }, (_, i) => `key-${String(i).padStart(4, '0')}`);
    const limits = new SpendLimits(store);
    for (const h of all) await limits.of(h).loaded;
    expect(all.every((h) => limits.of(h).stored === 0n)).toBe(true);
    await fn({
      all,
      limits,
      spendAll: (amount) =>
        store.query(
          `INSERT INTO key_spend (key_hash, spent) SELECT k, $2::bigint FROM json_array_elements_text($1::json) AS t(k)
             ON CONFLICT (key_hash) DO UPDATE SET spent = EXCLUDED.spent`,
          [JSON.stringify(all), amount],
        ),
      fresh: (amount) => all.filter((h) => limits.of(h).stored === amount),
    });
  } finally {
    await disposeStore(store);
  }
}

for (const c of storeCases()) {
  describe(`spend limits re-read after a group commit on ${c.name}`, () => {
    it('reads the busy keys after every commit and the idle ones in turns of 256, so none waits more than a few commits', () =>
      withKnownKeys(c, 600, async ({ limits, spendAll, fresh }) => {
        // A request in flight on one key; another key charged by the commit.
        limits.of('key-0599').reserved = 5n;
        const charged = new Set(['key-0598']);

        // Other replicas charged every key meanwhile.
        await spendAll(7);
        await limits.afterCommit(charged);
        // The two busy keys and the first 256 of the others: not all 600 (31 ms a commit at 10,000 keys).
        expect(fresh(7n)).toHaveLength(258);
        expect(fresh(7n)).toEqual(expect.arrayContaining(['key-0598', 'key-0599']));
        await limits.afterCommit(new Set());
        expect(fresh(7n)).toHaveLength(2 + 512);
        await limits.afterCommit(new Set());
        expect(fresh(7n)).toHaveLength(600);

        // The busy key is read after every commit, not only in its turn.
        await spendAll(9);
        await limits.afterCommit(new Set());
        expect(fresh(9n)).toContain('key-0599');
        expect(fresh(9n)).not.toContain('key-0598');
      }));

    it('reads every key after every commit while it knows no more than 256', () =>
      withKnownKeys(c, 256, async ({ limits, spendAll, fresh }) => {
        for (const amount of [3, 4]) {
          await spendAll(amount);
          await limits.afterCommit(new Set());
          expect(fresh(BigInt(amount))).toHaveLength(256);
        }
      }));
  });
}
