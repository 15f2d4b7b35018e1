import { describe, expect, it } from 'vitest';
import { writeCaptures } from '../../proxy/billing/commit.js';
import { credit, hold, release } from '../../proxy/billing/ledger.js';
import { foldUsageRollups } from '../../proxy/billing/usage.js';
import { openStore, type Store } from '../../proxy/store/index.js';
import { disposeStore, openPgliteThread } from '../support/stores.js';

/**
 * PGlite is single-user PostgreSQL: no autovacuum runs. The rows a DELETE leaves dead (the
 * pending usage rows every fold moves, released holds, expired stored responses) stayed in the
 * tables for good, which grew with every write ever made (and every usage summary read the pending
 * rows' table whole). The store vacuums PGlite itself while it is written.
 */
const shapes: [string, (vacuumIntervalMs: number) => Promise<Store>][] = [
  ['in memory', (vacuumIntervalMs) => openStore({ vacuumIntervalMs })],
  ['on a folder, in its thread', (vacuumIntervalMs) => openPgliteThread({ vacuumIntervalMs })],
];

const size = async (store: Store, table: string) => Number((await store.query<{ s: string }>(`SELECT pg_relation_size($1) AS s`, [table])).rows[0]!.s);

/** 1,500 requests' worth of churn: a commit of one usage record, a fold every tenth, a hold taken and released. */
async function churn(store: Store): Promise<void> {
  await store.tx((q) => credit(q, { account: 'a', operationId: 'grant', amount: 1_000_000_000n }));
  for (let i = 0; i < 1_500; i++) {
    await writeCaptures(store, [
      {
        operationId: `op-${i}`,
        leaseId: undefined,
        record: {
          requestId: `r-${i}`,
          keyName: 'k',
          keyHash: `h${i % 7}`,
          account: 'a',
          group: 'g',
          model: 'm',
          upstreamModel: 'm',
          protocol: 'chat-completions',
          usage: { inputTokens: 10, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 5, reasoningTokens: 0 },
          credits: 1n,
          usageSource: 'reported',
          status: 'ok',
          httpStatus: 200,
          latencyMs: 1,
        },
      },
    ]);
    await store.tx(async (q) => {
      await hold(q, { account: 'a', holdId: `h-${i}`, amount: 5n, expiresAt: new Date(Date.now() + 60_000) });
      await release(q, { holdId: `h-${i}` });
    });
    if (i % 10 === 9) await foldUsageRollups(store);
    // The vacuum's turns come between requests, as they would under a load.
    if (i % 50 === 0) await new Promise((r) => setTimeout(r, 5));
  }
}

describe('PGlite vacuumed while it is written', () => {
  for (const [name, open] of shapes) {
    it(`keeps the tables rows are deleted from small, ${name}`, async () => {
      const store = await open(20);
      try {
        await churn(store);
        // A page or two each here; without the vacuums (next case) about 100 and 50 KB.
        expect(await size(store, 'usage_rollup_pending')).toBeLessThanOrEqual(32 * 1024);
        expect(await size(store, 'holds')).toBeLessThanOrEqual(32 * 1024);
        // Nothing that lives was touched.
        const n = await store.query<{ n: string }>('SELECT count(*) AS n FROM usage_records');
        expect(Number(n.rows[0]!.n)).toBe(1_500);
      } finally {
        await disposeStore(store);
      }
    }, 120_000);
  }

  it('grows them without the vacuums (what the case above would see unfixed)', async () => {
    const store = await openStore({ vacuumIntervalMs: 0 });
    try {
      await churn(store);
      expect(await size(store, 'usage_rollup_pending')).toBeGreaterThan(64 * 1024);
      expect(await size(store, 'holds')).toBeGreaterThan(32 * 1024);
    } finally {
      await disposeStore(store);
    }
  }, 120_000);
});
