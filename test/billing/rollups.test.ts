import { describe, expect, it } from 'vitest';
import { usageSummary, type SummaryQuery } from '../../proxy/admin/aggregates.js';
import { writeCaptures, type CaptureItem } from '../../proxy/billing/commit.js';
import { credit } from '../../proxy/billing/ledger.js';
import { foldUsageRollups } from '../../proxy/billing/usage.js';
import type { Queryable, Store } from '../../proxy/store/index.js';
import { disposeStore, storeCases } from '../support/stores.js';

/**
 * The usage rollups are kept off the commit path (migration 031): the trigger appends rows that a
 * fold moves into usage_hourly and usage_daily later. The summaries must count every record once
 * all the same, whether its rows were folded yet or not, and while folds and commits overlap.
 */
let n = 0;
const item = (keyHash: string, model: string, credits: bigint, status = 'ok'): CaptureItem => ({
  operationId: `op-${++n}`,
  leaseId: undefined,
  record: {
    requestId: `r-${n}`,
    keyName: `name-${keyHash}`,
    keyHash,
    account: 'a',
    group: 'g',
    model,
    upstreamModel: model,
    protocol: 'chat-completions',
    usage: { inputTokens: 10, cachedInputTokens: 2, cacheWriteTokens: 0, outputTokens: 5, reasoningTokens: 0 },
    credits,
    usageSource: 'reported',
    status,
    httpStatus: status === 'ok' ? 200 : 502,
    latencyMs: 1,
  },
});

const HOUR = 3_600_000;
const NOW = Date.now();
const range = (bucket: 'hour' | 'day', groupBy: SummaryQuery['groupBy']): SummaryQuery => ({
  bucket,
  groupBy,
  since: new Date(NOW - 2 * HOUR),
  until: new Date(NOW + 2 * HOUR),
});

const count = async (q: Queryable, table: string) => Number((await q.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);

/** What the records themselves add up to, and what each rollup table holds. */
async function sums(q: Queryable) {
  const one = async (table: string) => {
    const r = await q.query<{ requests: string | null; errors: string | null; credits: string | null; output: string | null }>(
      `SELECT sum(${table === 'usage_records' ? '1' : 'requests'}) AS requests, sum(${table === 'usage_records' ? "CASE WHEN status <> 'ok' THEN 1 ELSE 0 END" : 'errors'}) AS errors,
              sum(credits) AS credits, sum(output_tokens) AS output FROM ${table}`,
    );
    const row = r.rows[0]!;
    return { requests: Number(row.requests ?? 0), errors: Number(row.errors ?? 0), credits: String(row.credits ?? 0), output: Number(row.output ?? 0) };
  };
  return { records: await one('usage_records'), hourly: await one('usage_hourly'), daily: await one('usage_daily') };
}

for (const c of storeCases({ thread: true })) {
  describe(`usage rollups on ${c.name}`, () => {
    it('count every record once in the summaries, before its rows are folded into the rollups and after', async () => {
      const store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'a', operationId: 'grant', amount: 1_000_000n }));
        await writeCaptures(store, [
          item('k1', 'm', 10n),
          item('k1', 'm', 20n),
          item('k1', 'n', 30n),
          item('k2', 'm', 40n, 'upstream_error'),
          item('k2', 'n', 50n),
        ]);
        // Nothing folded yet: the rollups are empty, their rows wait, and the summaries count them.
        expect(await count(store, 'usage_hourly')).toBe(0);
        expect(await count(store, 'usage_rollup_pending')).toBeGreaterThan(0);
        const before = await usageSummary(store, range('hour', 'model'));
        expect(before.totals).toMatchObject({ requests: 5, errors: 1, output_tokens: 25, credits: '0.000150' });
        expect(Object.fromEntries(before.data.map((r: Record<string, unknown>) => [r.model, r.requests]))).toEqual({ m: 3, n: 2 });
        const beforeDays = await usageSummary(store, range('day', 'key'));

        expect(await foldUsageRollups(store)).toBeGreaterThan(0);
        expect(await count(store, 'usage_rollup_pending')).toBe(0);
        expect(await usageSummary(store, range('hour', 'model'))).toEqual(before);
        expect(await usageSummary(store, range('day', 'key'))).toEqual(beforeDays);
        expect(await foldUsageRollups(store)).toBe(0);

        // Some folded, some not: one summary adds both.
        await writeCaptures(store, [item('k1', 'm', 1n), item('k3', 'm', 2n), item('k3', 'm', 3n, 'upstream_error')]);
        const mixed = await usageSummary(store, range('day', 'key'));
        expect(mixed.totals).toMatchObject({ requests: 8, errors: 2, credits: '0.000156' });
        expect(Object.fromEntries(mixed.data.map((r: Record<string, unknown>) => [r.key, r.requests]))).toEqual({ 'name-k1': 4, 'name-k2': 2, 'name-k3': 2 });
        await foldUsageRollups(store);
        expect(await usageSummary(store, range('day', 'key'))).toEqual(mixed);
        const s = await sums(store);
        expect(s.hourly).toEqual(s.records);
        expect(s.daily).toEqual(s.records);
      } finally {
        await disposeStore(store);
      }
    });

    it('stay exact while folds run beside the commits, as replicas run them', async () => {
      const store: Store = await c.open();
      try {
        await store.tx((q) => credit(q, { account: 'a', operationId: 'grant', amount: 1_000_000_000n }));
        let writing = true;
        const writers = Array.from({ length: 6 }, async (_, w) => {
          for (let i = 0; i < 15; i++)
            await writeCaptures(store, [item(`k${w % 3}`, 'm', 3n), item(`k${i % 4}`, i % 2 ? 'm' : 'n', 5n, i % 5 ? 'ok' : 'upstream_error')]);
        });
        // Every read, in one snapshot, counts exactly the records committed in it.
        const seen: [number, number][] = [];
        const readers = Array.from({ length: 2 }, async () => {
          while (writing)
            seen.push(
              await store.tx(async (q) => {
                await q.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
                const summary = await usageSummary(q, range('hour', 'none'));
                return [summary.totals.requests, await count(q, 'usage_records')];
              }),
            );
        });
        const folders = Array.from({ length: 3 }, async () => {
          while (writing) await foldUsageRollups(store);
        });
        await Promise.all(writers);
        writing = false;
        await Promise.all([...readers, ...folders]);
        await foldUsageRollups(store);
        expect(seen.length).toBeGreaterThan(0);
        expect(seen.filter(([total, records]) => total !== records)).toEqual([]);
        const s = await sums(store);
        expect(s.records.requests).toBe(6 * 15 * 2);
        expect(s.hourly).toEqual(s.records);
        expect(s.daily).toEqual(s.records);
        expect(await count(store, 'usage_rollup_pending')).toBe(0);
      } finally {
        await disposeStore(store);
      }
    });
  });
}

const url = process.env.DATABASE_URL;
describe.skipIf(!url)('usage rollup folds on postgres', () => {
  it('wait for no fold of another schema in the same database (another installation), only for one of their own', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    const pg = storeCases().find((c) => c.name === 'postgres')!;
    const [a, b] = await Promise.all([pg.open(), pg.open()]);
    try {
      for (const st of [a, b]) {
        await st.tx((q) => credit(q, { account: 'a', operationId: 'grant', amount: 1_000_000n }));
        await writeCaptures(st, [item('k1', 'm', 1n)]);
      }
      let folding: () => void = () => {};
      const started = new Promise<void>((r) => (folding = r));
      // A fold in schema a that has not committed yet holds a's fold lock.
      const first = a.tx(async (q) => {
        const moved = await foldUsageRollups(q);
        folding();
        await held;
        return moved;
      });
      await started;
      expect(await foldUsageRollups(a)).toBe(0);
      expect(await foldUsageRollups(b)).toBe(1);
      release();
      expect(await first).toBe(1);
      expect(await count(a, 'usage_rollup_pending')).toBe(0);
    } finally {
      release();
      await Promise.all([disposeStore(a), disposeStore(b)]);
    }
  });
});
