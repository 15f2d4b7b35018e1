/**
 * `npx tsx bench/console.ts`: the console's aggregate queries at scale. Fills a fresh schema of
 * PostgreSQL (DATABASE_URL) with BENCH_RECORDS usage records (default 10,000,000: 1,000 keys in
 * 100 accounts, 20 models, 90 days), through the same trigger that keeps the hourly rollup in
 * service, then times what the consoles ask: a key's usage by model per hour (a day) and per day
 * (30 days), every account per day (30 days), a key's latest requests, the latest of a model
 * across accounts: right after the fold of the fill's backlog, and again once the pending rows'
 * table is vacuumed (as it is in service). Also the rollup trigger's cost on inserts in 100-record statements (the group
 * commit's shape). BENCH_KEEP=1 keeps the schema; BENCH_SCHEMA=<it> (and BENCH_FILL_S, the fill's
 * seconds) measures it again after new migrations. Rewrites the "## Console aggregates" section of bench/RESULTS.md.
 */
import { randomBytes } from 'node:crypto';
import { parseSummaryQuery, usageSummary } from '../proxy/admin/aggregates.js';
import { foldUsageRollups, listUsage } from '../proxy/billing/index.js';
import { migrate, openStore, type Store } from '../proxy/store/index.js';
import { envNumber } from './env.js';
import { measuredBy, publish } from './results.js';

const RECORDS = envNumber('BENCH_RECORDS', 10_000_000);
const CHUNK = 500_000;
const DAYS = 90;

const FILL = `INSERT INTO usage_records (operation_id, request_id, key_name, key_hash, account, group_name, model, upstream_model, protocol,
  input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, credits, usage_source, status, http_status, latency_ms, ttft_ms, created_at)
SELECT 'op-' || i, 'req-' || i, 'key-' || (i % 1000), 'hash-' || (i % 1000), 'acct-' || (i % 100), 'default', 'model-' || (i % 20), 'up', 'chat-completions',
  200 + i % 300, 0, 0, 50 + i % 200, 0, 1000 + i % 5000, 'reported', CASE WHEN i % 97 = 0 THEN 'upstream_error' ELSE 'ok' END, 200, 300, 100,
  now() - make_interval(secs => ($3::float8 * GREATEST($1::bigint - i, 0)) / $1::float8)
FROM generate_series($2::bigint, $2::bigint + $4::bigint - 1) AS i`;

async function timed<T>(fn: () => Promise<T>, runs = 5): Promise<{ ms: number; value: T }> {
  let value = await fn(); // warm
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    value = await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)]!, value };
}

async function insertRate(store: Store, trigger: boolean, statements: number, base: number): Promise<number> {
  if (!trigger) await store.query('ALTER TABLE usage_records DISABLE TRIGGER usage_rollup');
  const t = performance.now();
  for (let s = 0; s < statements; s++) await store.query(FILL, [RECORDS, base + s * 100, DAYS * 86400, 100]);
  const rate = (statements * 100) / ((performance.now() - t) / 1000);
  if (!trigger) await store.query('ALTER TABLE usage_records ENABLE TRIGGER usage_rollup');
  return rate;
}

async function main() {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('set DATABASE_URL (PostgreSQL) for this benchmark');
  // BENCH_SCHEMA: a schema a run with BENCH_KEEP=1 filled; migrated to the current migrations and measured again.
  const reuse = process.env.BENCH_SCHEMA;
  const schema = reuse ?? `bench_${randomBytes(4).toString('hex')}`;
  const store = await openStore({ databaseUrl: url, schema });
  try {
    await migrate(store);
    const fillStart = performance.now();
    for (let from = 0; !reuse && from < RECORDS; from += CHUNK) {
      await store.query(FILL, [RECORDS, from, DAYS * 86400, Math.min(CHUNK, RECORDS - from)]);
      process.stderr.write(`\r${Math.min(from + CHUNK, RECORDS)} records`);
    }
    process.stderr.write('\n');
    // The trigger appends the rollups' rows; a replica's billing engine folds them every second.
    await foldUsageRollups(store);
    await store.query('ANALYZE usage_records');
    await store.query('ANALYZE usage_hourly');
    await store.query('ANALYZE usage_daily');
    const fillS = reuse ? Number(process.env.BENCH_FILL_S ?? NaN) : (performance.now() - fillStart) / 1000;
    const count = async (t: string) => Number((await store.query<{ n: string }>(`SELECT count(*) AS n FROM ${t}`)).rows[0]!.n);
    const rollupRows = await count('usage_hourly');
    const dailyRows = await count('usage_daily');
    const q = (s: string) => new URLSearchParams(s);
    const queries: [string, () => Promise<{ data: unknown[] }>][] = [];
    const add = (what: string, fn: () => Promise<{ data: unknown[] }>) => void queries.push([what, fn]);
    add("a key's usage by model, hourly, last 24 h (key holder's chart)", () =>
      usageSummary(store, { ...parseSummaryQuery(q('bucket=hour'), ['model']), keyHash: 'hash-7' }),
    );
    add("a key's usage by model, daily, last 30 days", () => usageSummary(store, { ...parseSummaryQuery(q('bucket=day'), ['model']), keyHash: 'hash-7' }));
    add('every account, daily, last 30 days (operator explorer)', () => usageSummary(store, parseSummaryQuery(q('bucket=day&group_by=account'), ['account'])));
    add('one account by key, hourly, last 7 days', () =>
      usageSummary(store, parseSummaryQuery(q(`bucket=hour&group_by=key&account=acct-3&since=${Math.floor(Date.now() / 1000) - 7 * 86400}`), ['key'])),
    );
    add("a key's latest 50 requests", () => listUsage(store, { keyHash: 'hash-7', limit: 50 }));
    add('latest 100 requests of one model, all accounts', () => listUsage(store, { model: 'model-3', limit: 100 }));
    add('latest 100 requests of one key name (admin filter)', () => listUsage(store, { keyName: 'key-9', limit: 100 }));
    // Twice: right after the fold of the fill's backlog, whose deleted pending rows every summary
    // still scans, and once the pending table is vacuumed, as autovacuum leaves it within a minute
    // (PGlite's own store every minute) and as it stays in service, about a second of rows.
    const rows: [string, number, number, string][] = [];
    for (const [what, fn] of queries) rows.push([what, (await timed(fn)).ms, NaN, '']);
    await store.query('VACUUM usage_rollup_pending');
    for (const [i, [, fn]] of queries.entries()) {
      const r = await timed(fn);
      rows[i]![2] = r.ms;
      rows[i]![3] = String(r.value.data.length);
    }
    // Fresh operation ids past the filled ones (a reused schema holds an earlier run's too).
    const base = RECORDS + 1 + Math.floor(Math.random() * 1e9) * 100_000;
    const pendingKiB = Number((await store.query<{ s: string }>(`SELECT pg_relation_size('usage_rollup_pending') AS s`)).rows[0]!.s) / 1024;
    const withTrigger = await insertRate(store, true, 200, base);
    const without = await insertRate(store, false, 200, base + 200 * 100);
    const lines = [
      '## Console aggregates',
      '',
      `${measuredBy('npx tsx bench/console.ts')}, PostgreSQL ${(await store.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version}.`,
      `${RECORDS.toLocaleString('en')} usage records (1,000 keys, 100 accounts, 20 models, ${DAYS} days) filled in ${fillS.toFixed(0)} s through the rollup trigger; the rollups hold ${rollupRows.toLocaleString('en')} hourly and ${dailyRows.toLocaleString('en')} daily rows. Median of 5 runs after one warm-up, through the functions behind the endpoints: once the pending rows' table is vacuumed (${pendingKiB.toFixed(0)} KiB then), as in service, and right after the fold that moved the fill's backlog, while its deleted rows are still in that table.`,
      '',
      '| query | ms | ms right after folding the backlog | rows |',
      '|---|---:|---:|---:|',
      ...rows.map(([w, backlog, ms, n]) => `| ${w} | ${ms.toFixed(1)} | ${backlog.toFixed(1)} | ${n} |`),
      '',
      `Inserting in statements of 100 records (a group commit's batch): ${withTrigger.toFixed(0)} records/s with the rollup trigger, ${without.toFixed(0)} without.`,
      '',
    ];
    // A smaller run (a try of the benchmark) is printed only: the section holds the 10-million-record figures.
    if (RECORDS >= 10_000_000) publish('## Console aggregates', lines.join('\n'));
    else process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    if (process.env.BENCH_KEEP || reuse) process.stderr.write(`kept schema ${schema}\n`);
    else await store.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => {});
    await store.close();
  }
}

await main();
