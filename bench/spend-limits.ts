/**
 * `npm run bench:spend-limits`: what re-reading limited keys' spend after a group commit costs,
 * by how many limited keys one replica knows (those used on it in the last minute). After each
 * of its group commits a replica re-reads, in one query, the keys the commit charged, those
 * with requests in flight, and up to 256 of the others in turn (proxy/billing/spend-limits.ts);
 * the next commit waits for that query. Each size is timed twice: with every key idle (what the
 * replica reads now) and with every key busy (every key read, as every commit read them all
 * until 2026-11-29). PostgreSQL when DATABASE_URL is set (a schema of its own, dropped at the
 * end), else in-memory PGlite. Rewrites the "## Spend limits" section of bench/RESULTS.md.
 *
 * Settings: BENCH_SPEND_KEYS (default "10,256,1000,10000"), BENCH_SPEND_COMMITS (re-reads timed
 * per figure, default 20; the figure is their median).
 */
import { randomBytes } from 'node:crypto';
import { SpendLimits } from '../proxy/billing/spend-limits.js';
import { openStore, type Store } from '../proxy/store/index.js';
import { envNumber } from './env.js';
import { measuredBy, median, publish, runAsCommand } from './results.js';

const SECTION = '## Spend limits';

async function timed(commits: number, run: () => Promise<void>): Promise<number> {
  await run(); // the statement prepared and the pages read once
  const ms: number[] = [];
  for (let i = 0; i < commits; i++) {
    const t0 = performance.now();
    await run();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

async function main(): Promise<void> {
  const sizes = (process.env.BENCH_SPEND_KEYS ?? '10,256,1000,10000').split(',').map(Number);
  const commits = envNumber('BENCH_SPEND_COMMITS', 20);
  const url = process.env.DATABASE_URL;
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const store: Store = await openStore(url ? { databaseUrl: url, schema } : {});
  const rows: string[] = [];
  try {
    for (const n of sizes) {
      const hashes = Array.from({ length: n }, () => randomBytes(32).toString('hex'));
      // Every key has spent something: a row each, as on a gateway that has served them all.
      await store.query(
        `INSERT INTO key_spend (key_hash, spent) SELECT k, 1 FROM json_array_elements_text($1::json) AS t(k) ON CONFLICT (key_hash) DO NOTHING`,
        [JSON.stringify(hashes)],
      );
      const limits = new SpendLimits(store);
      for (const h of hashes) limits.of(h);
      await Promise.all(hashes.map((h) => limits.of(h).loaded));
      const none = new Set<string>();
      const idle = await timed(commits, () => limits.afterCommit(none));
      for (const h of hashes) limits.of(h).reserved = 1n;
      const busy = await timed(commits, () => limits.afterCommit(none));
      rows.push(`| ${n.toLocaleString('en-US')} | ${idle.toFixed(2)} | ${busy.toFixed(2)} | ${((busy * 1000) / n).toFixed(1)} |`);
      process.stderr.write(`${n} keys: ${idle.toFixed(2)} ms idle, ${busy.toFixed(2)} ms all busy\n`);
    }
  } finally {
    if (store.kind === 'postgres') await store.query(`DROP SCHEMA "${schema}" CASCADE`);
    await store.close();
  }
  publish(
    SECTION,
    [
      SECTION,
      '',
      `${measuredBy('npm run bench:spend-limits')}, on ${url ? 'PostgreSQL' : 'in-memory PGlite'}.`,
      `One replica's re-read of its limited keys' spend after a group commit (one query; the next commit waits for it), median of ${commits}, by how many limited keys it knows: every key idle (read now: the busy ones and 256 of the others in turn) and every key busy (every key read, as every commit read them all until 2026-11-29).`,
      '',
      '| limited keys known | ms, keys idle | ms, every key busy | µs per key read, every key busy |',
      '|---:|---:|---:|---:|',
      ...rows,
    ].join('\n'),
  );
}

runAsCommand(import.meta.url, main);
