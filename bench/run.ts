/**
 * `npm run bench [-- [--quick] [--no-write]]`: the chat overhead benchmark, every figure a ratio to floors
 * measured in the same run. Targets, each its own process: the simulator called directly; the
 * bare Node proxy floor (node:http -> undici Pool, nothing parsed), and with DATABASE_URL the same
 * floor ending each answer after an insert committed to PostgreSQL; nginx as a reverse proxy when
 * it is installed; the gateway with billing on PostgreSQL (when DATABASE_URL is set; its default,
 * the journal table, and also committing on the request's path and with the billing journal), as the
 * quickstart ships it (PGlite in a data folder, billing journal) and with billing off. Scenarios: Chat Completions, JSON
 * and SSE, 1 and 50 keep-alive connections. For each: requests/s, p50/p99, time to first byte
 * (1 connection), the target's own CPU (and apart, PGlite's worker thread's) and write system calls per request (from /proc) and its RSS,
 * and a gateway's billing commits (mean time and requests per commit, from its /metrics). Rewrites the
 * "## Chat overhead" section of bench/RESULTS.md (with --no-write, prints it only).
 *
 * Load: wrk (Debian's `wrk`) at 50 connections when installed (a C load generator leaves the
 * cores to the targets), the Node load generator otherwise and at 1 connection (it measures the
 * first byte). Settings (environment): BENCH_ROUNDS (default 3; --quick 1: each scenario runs
 * that many times, the targets taking turns), BENCH_DURATION_MS (per round, default 3000),
 * BENCH_WARMUP_MS (before the first round, default 1000), BENCH_CONNECTIONS (default "1,50"),
 * BENCH_TARGETS (default "floor,floor-pg,nginx,postgres,postgres-commit,postgres-journal,pglite,no-billing"; also
 * "postgres-node", "pglite-node" and "no-billing-node": those targets on node:http's front
 * (TOLLGATE_HTTP_FRONT=node; the default is the lean front, proxy/front/lean.ts),
 * "pglite-inline": PGlite on the request thread instead of its worker thread, "no-billing-pg":
 * billing off, each answer's end after the durable floor's insert, and "floor-dispatch" and
 * "floor-net", the floor taken apart: bench/chat/floor-parts.ts).
 *
 * After every round of a metered gateway its books are checked (GET /bench/books on its admin
 * port), and after its shutdown once more: balance = grant - usage, the ledger consistent, as many
 * requests charged as the load read answers to the end (at 50 connections, within the request wrk
 * leaves unread on each connection when it stops), and nothing held once it has shut down. Books
 * that are not exact fail the run (exit code 1) and are named in the goal lines.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { deadPort } from '../test/support/ports.js';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BENCH_KEY, chatBody } from './chat/config.js';
import { runLoad, type LoadResult } from './chat/load.js';
import { booksProblem, type Books, type Charged } from './chat/books.js';
import { cpuTicks, imageNode, rssMiB, startChild, stopChild, threadTicks, TICK_US, writeCalls, type Child } from './chat/process.js';
import { runWrk, wrkAvailable } from './chat/wrk.js';
import { envNumber } from './env.js';
import { cpuIdle, measuredBy, median as medianOf, publish } from './results.js';

const NOTES = fileURLToPath(new URL('./chat/NOTES.md', import.meta.url));
/** The name of PGlite's worker thread (proxy/store/pglite-thread.ts), on the image's Node (24). */
const STORE_THREAD = 'pglite';
const SECTION = '## Chat overhead';

const quick = process.argv.includes('--quick');
const durationMs = envNumber('BENCH_DURATION_MS', 3000);
const warmupMs = envNumber('BENCH_WARMUP_MS', 1000);
const rounds = envNumber('BENCH_ROUNDS', quick ? 1 : 3);
const connectionsList = (process.env.BENCH_CONNECTIONS ?? '1,50').split(',').map(Number);
const wantedTargets = (process.env.BENCH_TARGETS ?? 'floor,floor-pg,nginx,postgres,postgres-commit,postgres-journal,pglite,no-billing').split(',');

interface Target {
  name: string;
  title: string;
  url: string;
  pid: number;
  /** Stops it and waits for its exit. */
  stop(): Promise<void>;
  /** Whether requests carry the API key (the gateway) or go as they are (floors). */
  gateway: boolean;
  /** A gateway's admin URL (its /metrics). */
  admin?: string;
  /** A metered gateway's process, which prints its books at shutdown. */
  metered?: Child;
}

/** One round of one scenario on one target. */
interface Sample {
  load: LoadResult;
  /** The target process's own CPU (user + system) per request, µs. */
  cpuUs: number;
  /** Of it, the embedded PostgreSQL's thread's (PGlite's worker, proxy/store/pglite-thread.ts), µs; 0 without one. */
  storeUs: number;
  /** Write system calls per request served. */
  writes: number;
  /** The gateway's billing commits in the round (none without billing). */
  commits: Commits | undefined;
  /** A metered gateway's books after the round, what every load so far may have had it charge, and what is wrong ('' when nothing). */
  books?: { books: Books; charged: Charged; problem: string };
}

/** Billing commits over a window: how many, how long they took in all (seconds), and the requests they carried. */
interface Commits {
  count: number;
  seconds: number;
  captures: number;
}

const COMMIT_METRICS = /^tollgate_billing_(commit_seconds_sum|commit_seconds_count|captures_total) (\S+)$/gm;

/** The gateway's commit counters now (undefined: no billing, or no admin port). */
async function commitCounters(admin: string | undefined): Promise<Commits | undefined> {
  if (!admin) return undefined;
  const text = await (await fetch(`${admin}/metrics`)).text();
  const v = new Map([...text.matchAll(COMMIT_METRICS)].map((m) => [m[1]!, Number(m[2])]));
  const count = v.get('commit_seconds_count');
  return count === undefined ? undefined : { count, seconds: v.get('commit_seconds_sum') ?? 0, captures: v.get('captures_total') ?? 0 };
}

function commitsBetween(a: Commits | undefined, b: Commits | undefined): Commits | undefined {
  return a && b ? { count: b.count - a.count, seconds: b.seconds - a.seconds, captures: b.captures - a.captures } : undefined;
}

interface Row {
  target: string;
  mode: 'json' | 'stream';
  connections: number;
  /** One per round, in round order (round i of every target ran within seconds of the others'). */
  samples: Sample[];
  rssMiB: number;
}

/** The median of the finite figures (a round without one, say no first byte, is left out); NaN when none is. */
function median(xs: number[]): number {
  const s = xs.filter(Number.isFinite);
  return s.length === 0 ? NaN : medianOf(s);
}

/** The median over rounds of a figure of one row. */
const med = (r: Row, f: (s: Sample) => number) => median(r.samples.map(f));
/** A figure against another target's in the same round (a ratio, a difference), round by round. */
const pairs = (r: Row, base: Row, f: (s: Sample, b: Sample) => number) => r.samples.map((s, i) => (base.samples[i] ? f(s, base.samples[i]) : NaN));
/** Its median over the rounds. */
const paired = (r: Row, base: Row, f: (s: Sample, b: Sample) => number) => median(pairs(r, base, f));
/**
 * A goal's figure: its median over the rounds, and how it spread over them. On a shared machine
 * one run's median moves by more than a change is worth; how many rounds met the goal says more.
 */
function goalFigure(r: Row, base: Row, f: (s: Sample, b: Sample) => number, met: (v: number) => boolean, show: (v: number) => string): string {
  const xs = pairs(r, base, f).filter(Number.isFinite);
  const figure = show(median(xs));
  if (xs.length < 2) return figure;
  return `${figure} (rounds ${show(Math.min(...xs))} to ${show(Math.max(...xs))}, met in ${xs.filter(met).length} of ${xs.length})`;
}

/** nginx as a plain reverse proxy with upstream keep-alive: one process (no master), so its CPU is one /proc entry. */
async function startNginx(simUrl: string): Promise<Target | undefined> {
  const bin = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
  if (!bin) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-nginx-'));
  const port = await deadPort();
  const sim = new URL(simUrl);
  writeFileSync(
    join(dir, 'nginx.conf'),
    `daemon off; master_process off; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream sim { server ${sim.host}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    keepalive_requests 1000000;
    location / { proxy_pass http://sim; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; }
  }
}
`,
  );
  const child = spawn(bin, ['-c', join(dir, 'nginx.conf'), '-p', dir], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 500));
  if (child.exitCode !== null) return undefined;
  return {
    name: 'nginx',
    title: 'nginx reverse proxy (floor)',
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
    gateway: false,
  };
}

const loadAtStart = loadavg()[0]!;
/** Read once at the start, as the load average is: the run's one-connection latencies move with it. */
const idle = cpuIdle();

let nodeVersion = '';

async function main(): Promise<void> {
  const useWrk = await wrkAvailable();
  nodeVersion = execFileSync(await imageNode(), ['--version'], { encoding: 'utf8' }).trim();
  const sim = await startChild(['sim']);
  const targets: Target[] = [{ name: 'direct', title: 'simulator, called directly', url: sim.url, pid: sim.child.pid!, stop: async () => {}, gateway: false }];
  // The gateway runs compiled, as the image runs it, unless `compiled` is false (through tsx, from the sources).
  const child = async (name: string, title: string, args: string[], env: Record<string, string>, gateway: boolean, compiled = gateway) => {
    const c = await startChild(args, env, compiled);
    const metered = gateway && env.BENCH_BILLING !== 'none';
    targets.push({
      name,
      title,
      url: c.url,
      pid: c.child.pid!,
      stop: () => stopChild(c),
      gateway,
      ...(c.admin ? { admin: c.admin } : {}),
      ...(metered ? { metered: c } : {}),
    });
  };
  // What each metered gateway may have charged so far, warm-ups included.
  const charged = new Map<string, Charged>();
  const shutdownBooks = new Map<string, { books: Books | undefined; problem: string }>();
  const rows: Row[] = [];
  const idleRss = new Map<string, number>();
  try {
    if (wantedTargets.includes('floor')) await child('floor', 'bare Node proxy (floor): node:http -> undici Pool', ['floor', sim.url], {}, false, true);
    // Not in the default list: the floor taken apart (bench/chat/floor-parts.ts).
    if (wantedTargets.includes('floor-dispatch'))
      await child(
        'floor-dispatch',
        "node:http -> undici dispatch(), the floor's parts as the gateway uses them",
        ['floor', sim.url],
        { BENCH_FLOOR_PART: 'dispatch' },
        false,
        true,
      );
    if (wantedTargets.includes('floor-net'))
      await child(
        'floor-net',
        'node:net with HTTP/1.1 framed by hand -> undici dispatch(): the floor without node:http',
        ['floor', sim.url],
        { BENCH_FLOOR_PART: 'net' },
        false,
        true,
      );
    const pgUrl = process.env.DATABASE_URL;
    if (pgUrl && wantedTargets.includes('floor-pg'))
      await child(
        'floor-pg',
        "the floor, each answer's end after a line for it is committed to PostgreSQL (a row of a one-index table; lines queued meanwhile share the next row): the durable floor",
        ['floor', sim.url],
        { BENCH_FLOOR_DATABASE_URL: pgUrl },
        false,
        true,
      );
    if (wantedTargets.includes('nginx')) {
      const n = await startNginx(sim.url);
      if (n) targets.push(n);
    }
    // PostgreSQL as it runs by default (charges durable in the journal table); committed on each
    // request's path (proxy.billingJournal.table: false); with the billing journal in a directory
    // (the chart's proxy.billingJournal.enabled).
    const pgTargets: [string, string, Record<string, string>][] = [
      ['postgres', 'Tollgate, metered billing on PostgreSQL (compiled, as the image runs it; charges durable in the journal table, the default)', {}],
      [
        'postgres-commit',
        "as postgres, each charge committed to the books on the request's path (TOLLGATE_BILLING_JOURNAL_TABLE=false)",
        { TOLLGATE_BILLING_JOURNAL_TABLE: 'false' },
      ],
      [
        'postgres-journal',
        'as postgres, charges durable in a billing journal directory (BENCH_JOURNAL=1), PostgreSQL written behind it',
        { BENCH_JOURNAL: '1' },
      ],
      [
        'postgres-node',
        "as postgres, on node:http's front (TOLLGATE_HTTP_FRONT=node: every request read by node:http's server)",
        { TOLLGATE_HTTP_FRONT: 'node' },
      ],
    ];
    for (const [name, title, env] of pgTargets)
      if (pgUrl && wantedTargets.includes(name)) await child(name, title, ['gateway', sim.url], { BENCH_DATABASE_URL: pgUrl, ...env }, true);
    if (wantedTargets.includes('pglite'))
      await child(
        'pglite',
        "Tollgate on the quickstart's store (compiled; PGlite in a data folder, charges durable in the billing journal)",
        ['gateway', sim.url],
        { BENCH_DATA: 'disk' },
        true,
      );
    // Not in the default list: the quickstart's store on the request thread, as before 2026-11-27.
    if (wantedTargets.includes('pglite-inline'))
      await child(
        'pglite-inline',
        "as pglite, PGlite on the gateway's request thread (BENCH_PGLITE_THREAD=0)",
        ['gateway', sim.url],
        { BENCH_DATA: 'disk', BENCH_PGLITE_THREAD: '0' },
        true,
      );
    if (wantedTargets.includes('pglite-node'))
      await child(
        'pglite-node',
        "as pglite, on node:http's front (TOLLGATE_HTTP_FRONT=node)",
        ['gateway', sim.url],
        { BENCH_DATA: 'disk', TOLLGATE_HTTP_FRONT: 'node' },
        true,
      );
    if (wantedTargets.includes('no-billing'))
      await child('no-billing', 'Tollgate, chat path alone (billing off; compiled)', ['gateway', sim.url], { BENCH_BILLING: 'none' }, true);
    if (wantedTargets.includes('no-billing-node'))
      await child(
        'no-billing-node',
        "as no-billing, on node:http's front (TOLLGATE_HTTP_FRONT=node)",
        ['gateway', sim.url],
        { BENCH_BILLING: 'none', TOLLGATE_HTTP_FRONT: 'node' },
        true,
      );
    // Not in the default list: set beside postgres, it tells billing's own work from its store's wait.
    if (pgUrl && wantedTargets.includes('no-billing-pg'))
      await child(
        'no-billing-pg',
        "as no-billing, each answer's end after the durable floor's insert (billing's store wait without billing's work)",
        ['gateway', sim.url],
        { BENCH_BILLING: 'none', BENCH_FLOOR_DATABASE_URL: pgUrl },
        true,
      );
    for (const t of targets) idleRss.set(t.name, rssMiB(t.pid));

    // Rounds interleave the targets: a scenario's figures are medians over rounds, and its ratios
    // compare each round's gateway with the floor of the same round, seconds apart, so a change of
    // the machine's load during the run weighs on both sides alike.
    for (const connections of connectionsList) {
      for (const mode of ['json', 'stream'] as const) {
        for (let round = 0; round < rounds; round++)
          for (const t of targets) {
            const opts = {
              url: t.url,
              path: '/v1/chat/completions',
              connections,
              warmupMs: round === 0 ? warmupMs : 0,
              durationMs,
              headers: t.gateway ? { authorization: `Bearer ${BENCH_KEY}` } : ({} as Record<string, string>),
              body: chatBody(t.gateway ? 'sim-gpt' : 'gpt-sim', mode === 'stream'),
            };
            // The warm-up runs first, then the counted window: CPU is read around the whole call
            // and divided by every request served in it (warm-up included, estimated at the same rate).
            // The commit counters are read outside it (a scrape costs the gateway CPU).
            const commitsBefore = await commitCounters(t.admin);
            const before = cpuTicks(t.pid);
            const storeBefore = threadTicks(t.pid, STORE_THREAD);
            const writesBefore = writeCalls(t.pid);
            const t0 = performance.now();
            const load = useWrk && connections > 1 ? await runWrk(opts) : await runLoad(opts);
            const wall = (performance.now() - t0) / 1000;
            const ticks = cpuTicks(t.pid) - before;
            const storeTicks = threadTicks(t.pid, STORE_THREAD) - storeBefore;
            const served = load.rps * wall;
            const writes = (writeCalls(t.pid) - writesBefore) / served;
            const commits = commitsBetween(commitsBefore, await commitCounters(t.admin));
            const sample: Sample = { load, cpuUs: (ticks * TICK_US) / served, storeUs: (storeTicks * TICK_US) / served, writes, commits };
            if (t.metered) sample.books = await checkBooks(t, charged, load.charged);
            let row = rows.find((r) => r.target === t.name && r.mode === mode && r.connections === connections);
            if (!row) rows.push((row = { target: t.name, mode, connections, samples: [], rssMiB: 0 }));
            row.samples.push(sample);
            row.rssMiB = Math.max(row.rssMiB, rssMiB(t.pid));
            process.stderr.write(
              `${t.name} ${mode} x${connections} round ${round + 1}: ${load.rps.toFixed(0)} rps, p50 ${load.p50.toFixed(3)} ms, cpu ${sample.cpuUs.toFixed(1)} µs/req${sample.storeUs > 0 ? ` (PGlite's thread ${sample.storeUs.toFixed(1)})` : ''}, writes ${sample.writes.toFixed(2)}/req, errors ${load.errors}\n`,
            );
          }
      }
    }
  } finally {
    await Promise.all(
      targets.map(async (t) => {
        await t.stop();
        if (!t.metered) return;
        // After the gateway's shutdown every lease is handed back: nothing may be held.
        const books = t.metered.lines.find((l) => l.books)?.books as Books | undefined;
        const problem = books ? booksProblem(books, charged.get(t.name) ?? { least: 0, most: 0 }, true) : 'no books printed at shutdown';
        shutdownBooks.set(t.name, { books, problem });
      }),
    );
    sim.child.kill('SIGTERM');
  }
  const wrong = [...rows.flatMap((r) => r.samples.map((s) => s.books?.problem ?? '')), ...[...shutdownBooks.values()].map((b) => b.problem)].filter(Boolean);
  const section = render(rows, targets, idleRss, useWrk, shutdownBooks);
  if (wrong.length) {
    // Printed to look at, not written: no table stands in RESULTS with books that do not add up.
    process.stdout.write(`${section}\n`);
    process.stderr.write(`BOOKS NOT EXACT (bench/RESULTS.md left as it was):\n${wrong.join('\n')}\n`);
    process.exitCode = 1;
    return;
  }
  publish(SECTION, section);
}

/**
 * A metered gateway's books after a round (GET /bench/books on its admin port, once its
 * journaled charges reached them), against what every load so far may have had it charge.
 */
async function checkBooks(t: Target, charged: Map<string, Charged>, round: Charged): Promise<NonNullable<Sample['books']>> {
  const so = charged.get(t.name) ?? { least: 0, most: 0 };
  const now = { least: so.least + round.least, most: so.most + round.most };
  charged.set(t.name, now);
  const books = (await (await fetch(`${t.admin}/bench/books`)).json()) as Books;
  const problem = booksProblem(books, now, false);
  if (problem) process.stderr.write(`${t.name}: books not exact: ${problem}\n`);
  return { books, charged: now, problem };
}

type PerRound = (s: Sample, base: Sample) => number;
const share: PerRound = (s, d) => s.load.rps / d.load.rps;
const cpuTimes: PerRound = (s, f) => s.cpuUs / f.cpuUs;
/** Without the embedded store's thread: the gateway's own CPU, as a PostgreSQL-backed gateway's leaves its database's out. */
const cpuTimesBesideStore: PerRound = (s, f) => (s.cpuUs - s.storeUs) / f.cpuUs;
const p50Added: PerRound = (s, d) => s.load.p50 - d.load.p50;
const ttfbAdded: PerRound = (s, d) => s.load.ttfb50 - d.load.ttfb50;
const shareOf = (r: Row, direct: Row) => paired(r, direct, share);
const cpuRatio = (r: Row, floor: Row) => paired(r, floor, cpuTimes);
const addedP50 = (r: Row, direct: Row) => paired(r, direct, p50Added);
const addedTtfb = (r: Row, direct: Row) => paired(r, direct, ttfbAdded);
const percent = (v: number) => `${(v * 100).toFixed(0)}%`;
const times = (v: number) => `${v.toFixed(2)}×`;
const fx = (v: number, d = 3) => (Number.isFinite(v) ? v.toFixed(d) : 'n/a');
const signed = (v: number) => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(3)}` : 'n/a');

/** A figure of the rounds' commits, its median over the rounds ('—' for a target without billing). */
function commitFigure(r: Row, f: (c: Commits) => number, digits: number): string {
  const xs = r.samples.map((s) => (s.commits && s.commits.count > 0 ? f(s.commits) : NaN));
  return xs.some(Number.isFinite) ? fx(median(xs), digits) : '—';
}

function render(
  rows: Row[],
  targets: Target[],
  idleRss: Map<string, number>,
  useWrk: boolean,
  shutdownBooks: Map<string, { books: Books | undefined; problem: string }>,
): string {
  const lines = [
    SECTION,
    '',
    `${measuredBy(`npm run bench${quick ? ' -- --quick' : ''}`)}, ${process.platform}${idle ? `, ${idle}` : ''}.`,
    `Every target runs as its own process beside the simulator; load from ${useWrk ? 'wrk (50 connections) and the Node load generator (1 connection: it measures the first byte)' : 'the Node load generator (undici Pool, keep-alive, closed loop)'}; ${rounds} round${rounds === 1 ? '' : 's'} of ${durationMs / 1000} s per scenario and target, the targets taking turns (${warmupMs / 1000} s of warm-up before the first). Each figure is the median of the rounds; each ratio and difference to the floor or to direct is the median of the rounds' own, taken against the floor or direct measured in the same round. Load average: ${loadAtStart.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end.`,
    'Request: POST /v1/chat/completions, a 2 KB body, a 12-word answer (SSE: 15 events). CPU is the target process’s own (user + system, /proc) per request served; writes/req its write system calls per request (/proc/PID/io), which unlike CPU hardly move with how busy the machine is.',
    `The floor and every gateway run compiled by tsc on Node ${nodeVersion} (as the image runs the gateway; \`npm start\` runs the same JavaScript, transpiled by esbuild, on the Node it finds), so that the rows differ by what they do, not by runtime (see bench/chat/NOTES.md for PGlite on Node 20).`,
    '',
    "Commit ms is a gateway's mean billing commit (one statement, the store's durable point; behind a journal, off the request's path) as its own /metrics time it, and req/commit the requests each carried, in the round's window and warm-up.",
    '',
    '| target | mode | conns | req/s | % of direct | CPU µs/req | × floor CPU | writes/req | p50 / p99 ms | added p50 ms | added TTFB ms | commit ms | req/commit | errors |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const direct = rows.find((d) => d.target === 'direct' && d.mode === r.mode && d.connections === r.connections)!;
    const floor = rows.find((d) => d.target === 'floor' && d.mode === r.mode && d.connections === r.connections);
    const isDirect = r.target === 'direct';
    const errors = r.samples.reduce((n, s) => n + s.load.errors, 0);
    const cpu = med(r, (s) => s.cpuUs);
    const writes = med(r, (s) => s.writes);
    const cells = [
      r.target,
      r.mode,
      String(r.connections),
      med(r, (s) => s.load.rps).toFixed(0),
      isDirect ? '100%' : percent(shareOf(r, direct)),
      isDirect ? '—' : fx(cpu, 1),
      isDirect || !floor ? '—' : times(cpuRatio(r, floor)),
      isDirect ? '—' : fx(writes, 2),
      `${fx(med(r, (s) => s.load.p50))} / ${fx(med(r, (s) => s.load.p99))}`,
      isDirect ? '—' : signed(addedP50(r, direct)),
      isDirect ? '—' : signed(addedTtfb(r, direct)),
      commitFigure(r, (c) => (c.seconds * 1000) / c.count, 3),
      commitFigure(r, (c) => c.captures / c.count, 1),
      String(errors),
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  lines.push('', '| target | what it is | RSS idle MiB | RSS after load MiB |', '|---|---|---:|---:|');
  for (const t of targets) {
    const after = Math.max(...rows.filter((r) => r.target === t.name).map((r) => r.rssMiB));
    lines.push(`| ${t.name} | ${t.title} | ${fx(idleRss.get(t.name) ?? NaN, 0)} | ${fx(after, 0)} |`);
  }
  lines.push('');
  // Goal 6: the books of a metered gateway after each of its rounds and after its shutdown.
  const booksLine = (name: string) => {
    const checks = rows.filter((r) => r.target === name).flatMap((r) => r.samples.flatMap((x) => (x.books ? [x.books] : [])));
    const end = shutdownBooks.get(name);
    if (!checks.length || !end) return '';
    const wrong = checks.filter((c) => c.problem);
    // The checks in the order they ran: the last saw every load.
    const last = checks.reduce((a, b) => (b.charged.most > a.charged.most ? b : a));
    const after = end.problem ? `after shutdown NOT exact: ${end.problem}` : 'after shutdown nothing held, balance = grant - usage, ledger consistent';
    return (
      `books (goal 6): exact after ${checks.length - wrong.length} of ${checks.length} rounds (balance = grant - usage, ledger consistent, ` +
      `as many requests charged as answers read to the end at one connection; at 50, wrk leaves a request unread on each connection when it stops)` +
      `${wrong.length ? `, NOT after ${wrong.length}: ${wrong[0]!.problem}` : ''}; ${last.books.records} requests charged for ${last.charged.least} answers read to the end, ` +
      `at most ${last.charged.most} sent; ${after}`
    );
  };
  const goal = (name: string) => {
    const r50 = (mode: string) => rows.find((r) => r.target === name && r.mode === mode && r.connections === 50);
    const f50 = (mode: string) => rows.find((r) => r.target === 'floor' && r.mode === mode && r.connections === 50);
    const d50 = (mode: string) => rows.find((r) => r.target === 'direct' && r.mode === mode && r.connections === 50);
    const r1 = (mode: string) => rows.find((r) => r.target === name && r.mode === mode && r.connections === 1);
    const d1 = (mode: string) => rows.find((r) => r.target === 'direct' && r.mode === mode && r.connections === 1);
    const f1 = (mode: string) => rows.find((r) => r.target === 'floor' && r.mode === mode && r.connections === 1);
    // The goals are absolute, but the bare Node floor's own share moves with the machine (+0.11 to
    // +0.36 ms on days of one week): what the gateway adds beyond it is its own.
    const beyondFloor = (mode: string, f: PerRound) =>
      r1(mode) && f1(mode) ? `, ${signed(paired(r1(mode)!, f1(mode)!, f))} ms beyond the floor's ${signed(paired(f1(mode)!, d1(mode)!, f))} ms` : '';
    // A charge durable on PostgreSQL before the last byte costs at least the durable floor's insert
    // (postgres-journal's is durable in a local directory first). Its first byte waits for no
    // store, yet comes later than the bare floor's at one connection: the wait before each
    // answer's end leaves the cores idle, and a core that idled comes back slower (RESULTS,
    // "2026-11-29, evening"). Every target with a store pays that too.
    const dpg = (mode: string) => rows.find((r) => r.target === 'floor-pg' && r.mode === mode && r.connections === 1);
    const beyondDurable = (mode: string, f: PerRound) =>
      dpg(mode) && r1(mode) && d1(mode)
        ? `, ${signed(paired(r1(mode)!, dpg(mode)!, f))} ms beyond the durable floor's ${signed(paired(dpg(mode)!, d1(mode)!, f))} ms`
        : '';
    // With no-billing-pg in the run: what postgres adds beyond the same path and the same wait,
    // billing's own work alone (RESULTS, "2026-11-29, late evening").
    const nbpg = (mode: string) => rows.find((r) => r.target === 'no-billing-pg' && r.mode === mode && r.connections === 1);
    const beyondWait = (mode: string, f: PerRound) =>
      nbpg(mode) && r1(mode) && d1(mode)
        ? `, ${signed(paired(r1(mode)!, nbpg(mode)!, f))} ms beyond no-billing-pg's ${signed(paired(nbpg(mode)!, d1(mode)!, f))} ms`
        : '';
    const pgCharged = name === 'postgres' || name === 'postgres-commit' || name === 'postgres-node';
    const pgWaited = pgCharged || name === 'no-billing-pg';
    const stored = name !== 'no-billing' && name !== 'no-billing-node';
    const parts: string[] = [];
    const ms = (v: number) => `${signed(v)} ms`;
    const cpu = ['json', 'stream'].map((m) => (r50(m) && f50(m) ? `${m} ${goalFigure(r50(m)!, f50(m)!, cpuTimes, (v) => v <= 2, times)}` : '')).filter(Boolean);
    if (cpu.length) parts.push(`CPU per request vs the bare Node floor at 50 connections (goal ≤ 2×): ${cpu.join(', ')}`);
    const inStore = ['json', 'stream'].filter((m) => r50(m)?.samples.some((x) => x.storeUs > 0));
    if (inStore.length)
      parts.push(
        `the same without PGlite's thread (the database, which a PostgreSQL-backed gateway runs in another process): ${inStore
          .map(
            (m) =>
              `${m} ${goalFigure(r50(m)!, f50(m)!, cpuTimesBesideStore, (v) => v <= 2, times)} (the thread ${fx(
                med(r50(m)!, (x) => x.storeUs),
                1,
              )} µs a request)`,
          )
          .join(', ')}`,
      );
    const tp = ['json', 'stream'].map((m) => (r50(m) && d50(m) ? `${m} ${goalFigure(r50(m)!, d50(m)!, share, (v) => v >= 0.4, percent)}` : '')).filter(Boolean);
    if (tp.length) parts.push(`throughput at 50 connections (goal ≥ 40% of direct): ${tp.join(', ')}`);
    const lat =
      r1('json') && d1('json')
        ? `added p50 of a whole JSON answer at 1 connection (goal ≤ 0.5 ms): ${goalFigure(r1('json')!, d1('json')!, p50Added, (v) => v <= 0.5, ms)}${beyondFloor('json', p50Added)}${pgWaited ? beyondDurable('json', p50Added) : ''}${pgCharged ? beyondWait('json', p50Added) : ''}`
        : '';
    if (lat) parts.push(lat);
    const ttfb =
      r1('stream') && d1('stream')
        ? `added first byte, SSE at 1 connection (goal ≤ 0.2 ms): ${goalFigure(r1('stream')!, d1('stream')!, ttfbAdded, (v) => v <= 0.2, ms)}${beyondFloor('stream', ttfbAdded)}${stored ? beyondDurable('stream', ttfbAdded) : ''}${pgCharged ? beyondWait('stream', ttfbAdded) : ''}`
        : '';
    if (ttfb) parts.push(ttfb);
    const books = booksLine(name);
    if (books) parts.push(books);
    return parts.length ? [`- **${name}**: ${parts.join('; ')}`] : [];
  };
  lines.push(
    ...['postgres', 'postgres-commit', 'postgres-journal', 'postgres-node', 'pglite', 'pglite-node', 'no-billing', 'no-billing-node', 'no-billing-pg'].flatMap(
      goal,
    ),
    '',
  );
  if (existsSync(NOTES)) lines.push(readFileSync(NOTES, 'utf8').trim(), '');
  return lines.join('\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
