/**
 * `npx tsx bench/durability.ts`: what standalone durability costs. The quickstart (`tollgate serve
 * --quickstart --data DIR`: PGlite on a folder, the billing journal on by default) is loaded
 * twice: with durable copies of the data folder (proxy/store/durable.ts, every 5 s, the default)
 * and without them (TOLLGATE_DATA_SNAPSHOT_SECONDS=0: PGlite's files never reach stable storage,
 * a machine crash can leave the folder unusable). Each round starts both variants afresh, one
 * after the other, and measures 1 connection (added latency) and 50 connections (requests per
 * second). Appends or rewrites the "## Standalone durability" section of bench/RESULTS.md.
 *
 * Settings (environment): BENCH_DURATION_MS (per measurement, default 10000: two copies or more),
 * BENCH_ROUNDS (default 3), BENCH_WARMUP_MS (default 2000).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { openStore } from '../proxy/store/index.js';
import { chatBody } from './chat/config.js';
import { cpuTicks, TICK_US } from './chat/process.js';
import { runLoad, type LoadResult } from './chat/load.js';
import { envNumber as num } from './env.js';
import { measuredBy, publish } from './results.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BIN = join(ROOT, 'bin/tollgate.js');
const KEY = 'sk-service-quickstart';
const DURATION = num('BENCH_DURATION_MS', 10_000);
const ROUNDS = num('BENCH_ROUNDS', 3);
const WARMUP = num('BENCH_WARMUP_MS', 2000);

interface Variant {
  name: string;
  env: Record<string, string>;
}
const VARIANTS: Variant[] = [
  { name: 'journal only (no durable copies)', env: { TOLLGATE_DATA_SNAPSHOT_SECONDS: '0' } },
  { name: 'journal + durable copies every 5 s (default)', env: {} },
];

interface Run {
  one: LoadResult;
  fifty: LoadResult;
  cpuUsPerReq: number;
  copies: number;
}

function start(dir: string, env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve', '--quickstart', '--data', dir, '--port', '0', '--admin-port', '0', '--simulator-port', '0'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, DATABASE_URL: '', TOLLGATE_FROM_SOURCE: '1', TOLLGATE_LOG_LEVEL: 'warn', ...env },
    });
    let buf = '';
    child.stderr!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /"api":"([^"]+)"/.exec(buf);
      if (m) resolve({ child, url: m[1]! });
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${buf}`)));
  });
}

async function measure(v: Variant): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-durability-'));
  // warn: the "listening" line is info; ask for it explicitly.
  const { child, url } = await start(dir, { ...v.env, TOLLGATE_LOG_LEVEL: 'info' });
  try {
    const base = { url, path: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY}` }, body: chatBody('sim-gpt', false), warmupMs: WARMUP };
    const one = await runLoad({ ...base, connections: 1, durationMs: DURATION });
    const t0 = cpuTicks(child.pid!);
    const fifty = await runLoad({ ...base, connections: 50, durationMs: DURATION });
    const cpuUsPerReq = ((cpuTicks(child.pid!) - t0) * TICK_US) / Math.max(1, fifty.requests);
    const snaps = join(dir, 'pg.durable');
    const copies = existsSync(snaps) ? Math.max(0, ...readdirSync(snaps).map((n) => Number.parseInt(n, 10) || 0)) : 0;
    return { one, fifty, cpuUsPerReq, copies };
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * One durable copy, in this process: a PGlite folder with about 20 MB of rows, written to between
 * copies; while each copy is made, a loop of `SELECT 1` measures how long queries are held.
 */
async function copyCost(): Promise<{ copyMs: number; stallMs: number; typicalMs: number; folderMiB: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-copy-'));
  const store = await openStore({ dataDir: join(dir, 'pg'), snapshotIntervalMs: 600_000 });
  try {
    await store.query('CREATE TABLE filler (id SERIAL PRIMARY KEY, body TEXT)');
    for (let i = 0; i < 100; i++) await store.query(`INSERT INTO filler (body) SELECT repeat('x', 200) FROM generate_series(1, 1000)`);
    await store.durable!(true);
    const copies: number[] = [];
    const stalls: number[] = [];
    const typical: number[] = [];
    for (let i = 0; i < 7; i++) {
      await store.query(`INSERT INTO filler (body) SELECT repeat('y', 200) FROM generate_series(1, 500)`);
      let stop = false;
      const lat: number[] = [];
      const probe = (async () => {
        while (!stop) {
          const t = performance.now();
          await store.query('SELECT 1');
          lat.push(performance.now() - t);
          // (PGlite answers without leaving the microtask queue: a bare loop would starve the copy's I/O.)
          await new Promise((r) => setImmediate(r));
        }
      })();
      const t0 = performance.now();
      await store.durable!(true);
      copies.push(performance.now() - t0);
      stop = true;
      await probe;
      stalls.push(Math.max(...lat));
      typical.push(median(lat));
    }
    const folderMiB = Number(
      execFileSync('du', ['-sm', join(dir, 'pg')])
        .toString()
        .split('\t')[0],
    );
    return { copyMs: median(copies), stallMs: median(stalls), typicalMs: median(typical), folderMiB };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const load = loadavg()[0]!.toFixed(1);
  const runs = new Map<string, Run[]>(VARIANTS.map((v) => [v.name, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const v of VARIANTS) {
      const run = await measure(v);
      runs.get(v.name)!.push(run);
      process.stderr.write(
        `round ${r + 1} ${v.name}: 1 conn p50 ${run.one.p50.toFixed(2)} ms, 50 conns ${run.fifty.rps.toFixed(0)} req/s, copies ${run.copies}\n`,
      );
    }
  }
  const rows: string[] = [];
  const base = runs.get(VARIANTS[0]!.name)!;
  for (const v of VARIANTS) {
    const rs = runs.get(v.name)!;
    const p50 = median(rs.map((x) => x.one.p50));
    const p99 = median(rs.map((x) => x.one.p99));
    const rps = median(rs.map((x) => x.fifty.rps));
    const added = v === VARIANTS[0] ? '—' : `${(p50 - median(base.map((x) => x.one.p50))).toFixed(2)} ms`;
    const fewer = v === VARIANTS[0] ? '—' : `${((1 - rps / median(base.map((x) => x.fifty.rps))) * 100).toFixed(0)}%`;
    const errors = rs.reduce((a, x) => a + x.one.errors + x.fifty.errors, 0);
    rows.push(
      `| ${v.name} | ${p50.toFixed(2)} / ${p99.toFixed(2)} | ${added} | ${rps.toFixed(0)} | ${fewer} | ${median(rs.map((x) => x.fifty.p50)).toFixed(2)} / ${median(rs.map((x) => x.fifty.p99)).toFixed(2)} | ${median(rs.map((x) => x.cpuUsPerReq)).toFixed(0)} | ${median(rs.map((x) => x.copies))} | ${errors} | ${rs.map((x) => x.one.p50.toFixed(2)).join(', ')}; ${rs.map((x) => x.fifty.rps.toFixed(0)).join(', ')} |`,
    );
  }
  const copy = await copyCost();
  const section = `## Standalone durability

${measuredBy('npx tsx bench/durability.ts')}. Load average ${load} when the run started (a figure near 0 means nothing else ran; the two cores are shared with the simulator and the load generator).
The quickstart as a user runs it (\`tollgate serve --quickstart --data DIR\`: PGlite on a folder, billing journal on), started afresh for each of ${ROUNDS} rounds per variant (the variants take turns); each round measures 1 connection, then 50 connections, ${DURATION / 1000} s each after ${WARMUP / 1000} s of warm-up (undici Pool, keep-alive, closed loop). Request: POST /v1/chat/completions to sim-gpt, JSON, about 2 KB. Medians of the rounds.

| variant | 1 conn p50 / p99 ms | added p50 at 1 conn | 50 conns req/s | fewer req/s | 50 conns p50 / p99 ms | gateway CPU µs/req (50 conns) | durable copies made | errors | rounds: 1 conn p50 ms; 50 conns req/s |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---|
${rows.join('\n')}

A durable copy (proxy/store/durable.ts) holds PGlite's queries for the time it takes to list the folder and copy the files that changed since the last copy (in the kernel, copy_file_range; unchanged files are hard-linked), then fsyncs the copy with queries running. Measured alone (in this process, a ${copy.folderMiB} MiB PGlite folder written between copies, median of 7 copies): a copy takes ${copy.copyMs.toFixed(0)} ms from start to durable; a \`SELECT 1\` loop running meanwhile waited at most ${copy.stallMs.toFixed(1)} ms once (the hold), ${copy.typicalMs.toFixed(2)} ms typically. The hold is mostly the copy of what changed under it: the WAL segment being written (16 MiB) and the tables written since the last copy; copying only the WAL's new bytes would shorten it. No request waits for a copy: a charge is durable in the billing journal before the answer's last bytes either way; the copy bounds what the journal must keep and what a machine crash can take back to 5 s of other writes.
`;
  publish('## Standalone durability', section);
}

await main();
