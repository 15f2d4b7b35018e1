/**
 * `npm run bench:memory`: the gateway's memory, each target a `tollgate serve` process of its own:
 *
 * - quickstart: run as `npm start` runs it (package.json's start script: scripts/start.js, the
 *   sources transpiled by esbuild, PGlite on a data folder, the simulator in the process),
 *   started on a fresh folder (PGlite runs initdb) and again on the folder it left (a restart);
 *   RSS idle, and after BENCH_MEMORY_REQUESTS chat requests (default 100,000): once settled and
 *   again after BENCH_MEMORY_REST_MS idle (default 60,000: V8's memory reducer gives the heap's
 *   growth back some 10-30 s after a load); its CPU per request during the load (the memory
 *   settings must not buy memory with CPU).
 * - floor: the bare Node proxy (bench/chat/floor.ts) in front of the simulator: per idle SSE
 *   stream, measured as for the gateway below (the floor the per-stream goal is read against).
 * - postgres: `serve --config DIR --database-url URL` from the sources through tsx (needs
 *   DATABASE_URL; a schema of its own, dropped at the end) in front of the simulator in its own
 *   process: RSS idle, after the same requests, and per idle SSE stream: BENCH_MEMORY_STREAMS
 *   (default 2,000) streaming requests held open by the simulator's `[sim:slow=…]` (no byte of
 *   the answer yet): RSS, and the JavaScript heap and Buffers live after full collections (read
 *   through the target's inspector, bench/memory/inspector.ts), before and while they are open;
 *   once with the benchmark's 1 KB chat body and once, in a fresh process, with one padded by
 *   BENCH_MEMORY_LARGE_BODY_KIB (default 32: a coding agent's). built: the same from dist/, on
 *   the image's Node (24 LTS, as bench/chat runs its targets; BENCH_NODE=current: the benchmark's
 *   own), as is the floor. The per-stream RSS is also split: glibc's main heap (malloc) is part of it.
 *   BENCH_MEMORY_SNAPSHOTS=DIR writes heap snapshots before and while the streams are open, for
 *   bench/memory/snapshot-diff.ts (what is new per stream, by kind of object, beyond the floor);
 *   taking one grows the target's RSS, so such a run's RSS figures are not to be compared.
 *
 * RSS is the target process's VmRSS (/proc), read after a settle of BENCH_MEMORY_SETTLE_MS (default
 * 5000); "+children" adds the processes it started (tsx's esbuild service, where tsx runs). Every load ends with the
 * books checked through the admin API (ledger verify, nothing held). `-- --json FILE` also writes
 * the figures as JSON (`--from FILE` renders such a file instead of measuring); BENCH_MEMORY_BEFORE=FILE (such a file from an earlier commit) adds a
 * "before" column. Rewrites the "## Memory" section of bench/RESULTS.md (with --no-write, only
 * prints it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { BENCH_KEY, BENCH_KEY_HASH, chatBody } from './chat/config.js';
import { cpuTicks, imageNode, startChild, TICK_US } from './chat/process.js';
import type { Store } from '../proxy/store/index.js';
import { envNumber } from './env.js';
import { attach, type Live } from './memory/inspector.js';
import { deadPort } from '../test/support/ports.js';
import { measuredBy, writeSection } from './results.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SECTION = '## Memory';
const requests = envNumber('BENCH_MEMORY_REQUESTS', 100_000);
const streams = envNumber('BENCH_MEMORY_STREAMS', 2000);
/** The second idle-stream measure's request body, KiB (a coding agent's first request is 30-60 KB; later ones grow). */
const largeKiB = envNumber('BENCH_MEMORY_LARGE_BODY_KIB', 32);
const connections = envNumber('BENCH_MEMORY_CONNECTIONS', 50);
const settleMs = envNumber('BENCH_MEMORY_SETTLE_MS', 5000);
const restMs = envNumber('BENCH_MEMORY_REST_MS', 60_000);
const jsonOut = process.argv.includes('--json') ? process.argv[process.argv.indexOf('--json') + 1] : undefined;
const noWrite = process.argv.includes('--no-write');
// BENCH_MEMORY_SNAPSHOTS=DIR: heap snapshots before and while the idle streams are open, per target and body size.
const snapshots = process.env.BENCH_MEMORY_SNAPSHOTS;
const wanted = (process.env.BENCH_TARGETS ?? 'quickstart,floor,postgres,built').split(',');
const ADMIN_TOKEN = 'bench-memory-admin';

/** Every figure in MiB (streams: KiB per stream); absent when not measured. */
export interface Figures {
  commit: string;
  quickstartFirstIdle?: number;
  quickstartFirstIdleTree?: number;
  quickstartAfterLoad?: number;
  quickstartAfterLoadTree?: number;
  /** RSS once the quickstart has been idle BENCH_MEMORY_REST_MS after the load. */
  quickstartAfterRest?: number;
  /** The quickstart process's own CPU per request during the load, µs (its in-process simulator included). */
  quickstartCpuUs?: number;
  quickstartPeak?: number;
  quickstartStartPeak?: number;
  quickstartRestartIdle?: number;
  quickstartRestartIdleTree?: number;
  quickstartBooks?: string;
  quickstartRps?: number;
  postgresIdle?: number;
  postgresIdleTree?: number;
  postgresAfterLoad?: number;
  postgresPeak?: number;
  postgresBooks?: string;
  postgresRps?: number;
  streamsBase?: number;
  streamsOpen?: number;
  streamsKiB?: number;
  streamsHeapKiB?: number;
  builtIdle?: number;
  builtStreamsKiB?: number;
  builtStreamsHeapKiB?: number;
  builtBooks?: string;
  /** The bare Node proxy's RSS per idle stream, KiB (the floor the per-stream goal is read against). */
  floorStreamsKiB?: number;
  /** The section's first line, written when the figures were measured (`--from` renders it as it was). */
  measured?: string;
  /** The Node the floor and the built gateway ran on (the image's). */
  imageNode?: string;
  /** Per idle stream, KiB, by target (postgres, built, floor) and request body (small, large). */
  perStream?: Record<string, PerStream>;
}

/** One idle-stream measure, KiB per stream: RSS, and what is live after full collections. */
export interface PerStream {
  bodyBytes: number;
  rssKiB: number;
  heapKiB: number;
  buffersKiB: number;
  /** glibc's main heap (resident): part of the RSS, outside V8's JavaScript heap. */
  mallocKiB?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The process and every process it started, RSS MiB. */
function treeRss(pid: number): number {
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  const walk = (p: number) => {
    total += status(p, 'VmRSS') || 0;
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return total;
}

interface Serve {
  child: ChildProcess;
  api: string;
  admin: string;
  stop(): Promise<void>;
}

const startScript = () => (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;

/**
 * package.json's `start` script as npm runs it (`VAR=value … node FLAGS scripts/start.js serve
 * --quickstart`): its environment, and the arguments after `node`.
 */
function npmStart(script: string): { env: Record<string, string>; args: string[] } {
  const words = script.trim().split(/\s+/);
  const env: Record<string, string> = {};
  while (words.length && /^[A-Z_][A-Z0-9_]*=/.test(words[0]!)) {
    const [k, ...v] = words.shift()!.split('=');
    env[k!] = v.join('=');
  }
  if (words.shift() !== 'node') throw new Error(`the start script does not run node: ${script}`);
  return { env, args: words };
}

/**
 * `tollgate serve ARGS` in CWD, run as `npm start` runs it (package.json's start script; ARGS
 * follow its own `serve --quickstart`), from the sources through tsx (bin/tollgate.js in a
 * checkout), or from the build (dist/, as the image runs it). Resolves when its log says it listens.
 */
async function serve(args: string[], cwd: string, how: 'npm-start' | 'sources' | 'built', env: Record<string, string> = {}): Promise<Serve> {
  // The build runs on the image's Node (24 LTS; BENCH_NODE=current: this one), as in bench/chat.
  const node = how === 'built' ? await imageNode() : process.execPath;
  return new Promise((resolve, reject) => {
    const start = npmStart(startScript());
    const command =
      how === 'npm-start'
        ? start.args.map((a) => (a.startsWith('scripts/') ? join(ROOT, a) : a))
        : [join(ROOT, how === 'built' ? 'dist/cli/main.js' : 'bin/tollgate.js'), 'serve'];
    const child = spawn(node, [...command, '--port', '0', '--admin-port', '0', '--admin-token', ADMIN_TOKEN, ...args], {
      cwd,
      stdio: ['ignore', 'ignore', 'pipe'],
      // The quickstart runs on PGlite only when no DATABASE_URL is in its environment.
      env: {
        ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'DATABASE_URL' && k !== 'REDIS_URL')),
        ...(how === 'npm-start' ? start.env : {}),
        ...env,
      },
    });
    let buf = '';
    let done = false;
    const onData = (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let rec: { msg?: string; api?: string; admin?: string; level?: string } = {};
        try {
          rec = JSON.parse(line) as typeof rec;
        } catch {
          process.stderr.write(`${line}\n`);
        }
        if (rec.level === 'error') process.stderr.write(`${line}\n`);
        if (rec.msg === 'gateway listening' && !done) {
          done = true;
          const exited = new Promise<void>((r) => child.once('exit', () => r()));
          resolve({
            child,
            api: rec.api!,
            admin: rec.admin!,
            stop: async () => {
              child.kill('SIGTERM');
              await Promise.race([exited, sleep(15_000).then(() => child.kill('SIGKILL'))]);
            },
          });
        }
      }
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      if (!done) reject(new Error(`serve ${args.join(' ')} exited with ${code}`));
    });
  });
}

async function settled(pid: number): Promise<{ rss: number; tree: number }> {
  await sleep(settleMs);
  return { rss: status(pid, 'VmRSS'), tree: treeRss(pid) };
}

/** `total` chat requests on `connections` keep-alive connections, every other one streamed. */
async function load(url: string, key: string, model: string, total: number): Promise<{ rps: number; errors: number }> {
  const pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const bodies = [false, true].map((s) => Buffer.from(chatBody(model, s)));
  let sent = 0;
  let errors = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (sent < total) {
      const body = bodies[sent++ % 2]!;
      try {
        const res = await pool.request({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body,
        });
        await res.body.dump({ limit: Infinity });
        if (res.statusCode !== 200) errors++;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const rps = total / ((performance.now() - t0) / 1000);
  await pool.close();
  if (errors) process.stderr.write(`load: ${errors} of ${total} requests failed\n`);
  return { rps, errors };
}

/** The books after a clean shutdown: nothing held, balance = grant - usage, the ledger invariant (verifyLedger). */
async function books(store: Store, account: string, granted: bigint, answered: number): Promise<string> {
  const { accountState, verifyLedger } = await import('../proxy/billing/ledger.js');
  const a = await accountState(store, account);
  const u = await store.query<{ s: unknown; n: unknown }>('SELECT COALESCE(SUM(credits), 0) AS s, COUNT(*) AS n FROM usage_records WHERE account = $1', [
    account,
  ]);
  const violations = await verifyLedger(store);
  const records = Number(u.rows[0]!.n);
  const exact = a.balance === granted - BigInt(String(u.rows[0]!.s));
  return `${records} usage records for ${answered} answers, held ${a.held}, balance = grant - usage: ${exact ? 'yes' : 'NO'}, invariant violations: ${violations.length}`;
}

async function quickstart(f: Figures): Promise<void> {
  const cwd = mkdtempSync(join(tmpdir(), 'tollgate-memory-'));
  try {
    const args = ['--simulator-port', '0'];
    let s = await serve(args, cwd, 'npm-start');
    const pid = s.child.pid!;
    const idle = await settled(pid);
    f.quickstartFirstIdle = idle.rss;
    f.quickstartFirstIdleTree = idle.tree;
    f.quickstartStartPeak = status(pid, 'VmHWM');
    log(`quickstart first start idle: ${idle.rss.toFixed(0)} MiB (+children ${idle.tree.toFixed(0)})`);
    const ticks = cpuTicks(pid);
    const l = await load(s.api, 'sk-service-quickstart', 'sim-gpt', requests);
    const loaded = performance.now();
    f.quickstartCpuUs = ((cpuTicks(pid) - ticks) * TICK_US) / requests;
    f.quickstartRps = l.rps;
    const after = await settled(pid);
    f.quickstartAfterLoad = after.rss;
    f.quickstartAfterLoadTree = after.tree;
    f.quickstartPeak = status(pid, 'VmHWM');
    log(
      `quickstart after ${requests} requests (${l.rps.toFixed(0)}/s, ${f.quickstartCpuUs.toFixed(0)} µs CPU each): ${after.rss.toFixed(0)} MiB, peak ${f.quickstartPeak.toFixed(0)}`,
    );
    await sleep(restMs - (performance.now() - loaded));
    f.quickstartAfterRest = status(pid, 'VmRSS');
    log(`quickstart ${restMs / 1000} s after the load: ${f.quickstartAfterRest.toFixed(0)} MiB`);
    await s.stop();
    const { openStore } = await import('../proxy/store/index.js');
    const { MICRO } = await import('../api/snapshot/money.js');
    const { QUICKSTART_GRANT_CREDITS } = await import('../proxy/front/features.js');
    const store = await openStore({ dataDir: join(cwd, '.tollgate/pg') });
    f.quickstartBooks = await books(store, 'demo', QUICKSTART_GRANT_CREDITS * MICRO, requests - l.errors).finally(() => store.close());
    log(`quickstart books: ${f.quickstartBooks}`);
    s = await serve(args, cwd, 'npm-start');
    const again = await settled(s.child.pid!);
    f.quickstartRestartIdle = again.rss;
    f.quickstartRestartIdleTree = again.tree;
    log(`quickstart restart idle: ${again.rss.toFixed(0)} MiB (+children ${again.tree.toFixed(0)})`);
    await s.stop();
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

/** `serve --config DIR --database-url URL` (the sources, or the build) beside the simulator: idle, idle streams, then the load. */
async function postgres(f: Figures, databaseUrl: string, built: boolean): Promise<void> {
  const { PostgresStore } = await import('../proxy/store/postgres.js');
  const { credit } = await import('../proxy/billing/ledger.js');
  const { MICRO } = await import('../api/snapshot/money.js');
  const schema = `bench_memory_${process.pid}_${built ? 'built' : 'src'}`;
  const GRANT = 1_000_000_000n * MICRO;
  const admin = new PostgresStore(databaseUrl, { poolSize: 1 });
  await admin.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const sim = await startChild(['sim']);
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-memory-config-'));
  let s: Serve | undefined;
  try {
    writeFileSync(
      join(dir, 'bench.yaml'),
      `apiVersion: tollgate.dev/v1alpha1
kind: ModelRoute
metadata: { name: sim-gpt }
spec:
  type: chat
  backends: [{ provider: openai, baseURL: "${sim.url}/v1", model: gpt-sim, timeoutSeconds: 600 }]
  pricing: { inputPerMillion: "0.50", outputPerMillion: "1.50" }
---
apiVersion: tollgate.dev/v1alpha1
kind: Group
metadata: { name: bench }
spec: { models: [sim-gpt] }
---
apiVersion: tollgate.dev/v1alpha1
kind: ApiKey
metadata: { name: bench }
spec: { group: bench, account: bench, keyHash: "${BENCH_KEY_HASH}" }
`,
    );
    const start = async () => {
      const port = await deadPort();
      s = await serve(['--config', dir, '--database-url', url.href], dir, built ? 'built' : 'sources', { NODE_OPTIONS: `--inspect-port=127.0.0.1:${port}` });
      return { serving: s, pid: s.child.pid!, port };
    };
    const first = await start();
    const pid = first.pid;
    const store = new PostgresStore(databaseUrl, { schema, poolSize: 1 });
    await store.tx((q) => credit(q, { account: 'bench', operationId: 'bench-memory-grant', amount: GRANT }));
    await store.close();
    const idle = await settled(pid);
    const name = built ? 'postgres, built' : 'postgres';
    log(`${name} idle: ${idle.rss.toFixed(0)} MiB (+children ${idle.tree.toFixed(0)})`);
    if (built) f.builtIdle = idle.rss;
    else {
      f.postgresIdle = idle.rss;
      f.postgresIdleTree = idle.tree;
    }
    // Each body size in a fresh process: after an aborted call undici keeps a connection it never
    // used (nodejs/undici#5845), which a second round would reuse without paying for it.
    const round = async (at: { serving: Serve; pid: number; port: number }, padKiB: number) => {
      // A few requests first, so that what every first request sets up is not counted per stream.
      await load(at.serving.api, BENCH_KEY, 'sim-gpt', 200);
      const live = await attach(at.pid, at.port);
      const r = await idleStreams(at.serving.api, at.pid, live, padKiB, name);
      live.close();
      return r;
    };
    const st = await round(first, 0);
    await first.serving.stop();
    const second = await start();
    const large = await round(second, largeKiB);
    (f.perStream ??= {})[built ? 'built' : 'postgres'] = st.per;
    f.perStream[built ? 'built, large body' : 'postgres, large body'] = large.per;
    if (built) {
      f.builtStreamsKiB = st.per.rssKiB;
      f.builtStreamsHeapKiB = st.per.heapKiB;
    } else {
      f.streamsBase = st.base;
      f.streamsOpen = st.open;
      f.streamsKiB = st.per.rssKiB;
      f.streamsHeapKiB = st.per.heapKiB;
    }
    let answered = 400;
    if (!built) {
      const l = await load(second.serving.api, BENCH_KEY, 'sim-gpt', requests);
      answered += requests - l.errors;
      f.postgresRps = l.rps;
      const after = await settled(second.pid);
      f.postgresAfterLoad = after.rss;
      f.postgresPeak = status(second.pid, 'VmHWM');
      log(`${name} after ${requests} requests (${l.rps.toFixed(0)}/s): ${after.rss.toFixed(0)} MiB`);
    }
    await second.serving.stop();
    const check = new PostgresStore(databaseUrl, { schema, poolSize: 1 });
    const b = await books(check, 'bench', GRANT, answered).finally(() => check.close());
    if (built) f.builtBooks = b;
    else f.postgresBooks = b;
    log(`${name} books (after the streams, aborted, and the load): ${b}`);
  } finally {
    await s?.stop();
    sim.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => {});
    await admin.close();
  }
}

/** The bare Node proxy (bench/chat/floor.ts) in front of the simulator, both processes of their own: per idle stream. */
async function floor(f: Figures): Promise<void> {
  const sim = await startChild(['sim']);
  // Every stream gets its upstream connection, as in the gateway (the floor's pool otherwise queues past 256).
  // Each body size in a fresh floor, as for the gateway.
  const round = async (padKiB: number) => {
    const port = await deadPort();
    const fl = await startChild(['floor', sim.url], { BENCH_FLOOR_CONNECTIONS: String(streams * 2), NODE_OPTIONS: `--inspect-port=127.0.0.1:${port}` }, true);
    try {
      const pid = fl.child.pid!;
      await load(fl.url, BENCH_KEY, 'sim-gpt', 200);
      const live = await attach(pid, port);
      const r = await idleStreams(fl.url, pid, live, padKiB, 'floor');
      live.close();
      return r;
    } finally {
      fl.child.kill('SIGTERM');
    }
  };
  try {
    const st = await round(0);
    const large = await round(largeKiB);
    f.floorStreamsKiB = st.per.rssKiB;
    (f.perStream ??= {}).floor = st.per;
    f.perStream['floor, large body'] = large.per;
  } finally {
    sim.child.kill('SIGTERM');
  }
}

/**
 * Streams held open: each waits for its first byte from the simulator ([sim:slow=…]). `padKiB`
 * more of text in the last message makes the request body that much larger. RSS, the live heap
 * and live Buffers (after full collections, through the inspector) while they are open, minus
 * before, per stream.
 */
async function idleStreams(api: string, pid: number, live: Live, padKiB: number, name: string): Promise<{ base: number; open: number; per: PerStream }> {
  const snapshot = async (phase: string) => {
    if (snapshots) await live.snapshot(join(snapshots, `${name.replace(/\W+/g, '-')}-${padKiB}-${phase}.heapsnapshot`));
  };
  const body = JSON.parse(chatBody('sim-gpt', true)) as { messages: { content: string }[] };
  body.messages.at(-1)!.content += `${' and more'.repeat(Math.ceil((padKiB * 1024) / 9)).slice(0, padKiB * 1024)} [sim:slow=120000]`;
  const payload = Buffer.from(JSON.stringify(body));
  await sleep(settleMs);
  const before = await live.collect();
  const base = status(pid, 'VmRSS');
  const mallocBefore = mallocHeapKiB(pid);
  await snapshot('before');
  const pool = new Pool(api, { connections: streams, pipelining: 1 });
  const ac = new AbortController();
  setMaxListeners(streams + 10, ac.signal);
  const open1 = () =>
    pool
      .request({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' },
        body: payload,
        signal: ac.signal,
      })
      .then(
        (r) => r.body.dump(),
        () => {},
      );
  // A stream is held once the target has accepted its connection and read its request: count the
  // connections it has accepted, then wait for its sockets to stand still (the upstream calls made).
  // Not the target's sockets alone: after an aborted call undici opens a connection it never uses
  // (nodejs/undici#5845), and the next round's requests reuse those.
  const port = new URL(api).port;
  const sockets = () => readdirSync(`/proc/${pid}/fd`).length;
  const pending: Promise<unknown>[] = [];
  const acceptedBefore = accepted(port);
  let held = 0;
  // In steps of 250: thousands of connections at once overflow the listen queue, and the
  // dropped connects are retried after seconds.
  for (let n = 0; n < streams;) {
    const step = Math.min(250, streams - n);
    for (let i = 0; i < step; i++) pending.push(open1());
    n += step;
    // Until every stream so far is accepted and the sockets have stood still 3 s (10 s if some are
    // missing: those are not counted as held).
    for (let i = 0, still = 0, last = -1; i < 240; i++) {
      await sleep(1000);
      held = accepted(port) - acceptedBefore;
      const now = sockets();
      still = now === last ? still + 1 : 0;
      last = now;
      if (still >= (held >= n ? 3 : 10)) break;
    }
  }
  await sleep(settleMs);
  const during = await live.collect();
  const open = status(pid, 'VmRSS');
  const mallocOpen = mallocHeapKiB(pid);
  await snapshot('open');
  ac.abort();
  await Promise.all(pending);
  await pool.close();
  await sleep(1000);
  held = Math.max(1, Math.min(streams, held));
  const per: PerStream = {
    bodyBytes: payload.length,
    rssKiB: ((open - base) * 1024) / held,
    heapKiB: (during.heapKiB - before.heapKiB) / held,
    buffersKiB: (during.buffersKiB - before.buffersKiB) / held,
    mallocKiB: (mallocOpen - mallocBefore) / held,
  };
  log(
    `${name}: ${held} idle streams of ${payload.length} bytes: ${base.toFixed(0)} -> ${open.toFixed(0)} MiB; per stream ${per.rssKiB.toFixed(1)} KiB RSS, live ${per.heapKiB.toFixed(1)} KiB heap and ${per.buffersKiB.toFixed(1)} KiB buffers`,
  );
  return { base, open, per };
}

/**
 * The resident KiB of glibc's main heap ([heap] in /proc/PID/smaps): what native code (Node's
 * sockets and HTTP parsers, Buffers' memory, V8's own bookkeeping) got from malloc and has not
 * given back; V8's JavaScript heap lives in mappings of its own.
 */
function mallocHeapKiB(pid: number): number {
  let kib = 0;
  let inHeap = false;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inHeap = line.trimEnd().endsWith('[heap]');
    else if (inHeap && line.startsWith('Rss:')) kib += Number(/(\d+)/.exec(line)![1]);
  }
  return kib;
}

/** Established TCP connections whose local end is `port` (a server's accepted connections), from /proc/net. */
function accepted(port: string): number {
  const hex = Number(port).toString(16).toUpperCase().padStart(4, '0');
  let n = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; st 01 is ESTABLISHED.
      if (f[1]?.endsWith(`:${hex}`) && f[3] === '01') n++;
    }
  }
  return n;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

const fx = (v: number | undefined, d = 0) => (v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(d));

/** The issue's goals are in MB and KB (10^6, 10^3); the figures in MiB and KiB. */
const mb = (n: number) => `≤ ${Math.floor((n * 1e6) / 2 ** 20)} (${n} MB)`;
const kb = (n: number) => `≤ ${Math.floor((n * 1e4) / 2 ** 10) / 10} (${n} KB)`;

const measuredLine = () => `${measuredBy(`npm run bench:memory`)}, ${process.platform}; load average ${loadavg()[0]!.toFixed(1)} at the end.`;

function render(f: Figures, before: Figures | undefined): string {
  const row = (what: string, goal: string, key: keyof Figures, d = 0) =>
    `| ${what} | ${goal} | ${before ? `${fx(before[key] as number | undefined, d)} | ` : ''}${fx(f[key] as number | undefined, d)} |`;
  const head = before
    ? `| figure | goal | before (${before.commit}) | after (${f.commit}) |\n|---|---|---:|---:|`
    : `| figure | goal | ${f.commit} |\n|---|---|---:|`;
  return [
    SECTION,
    '',
    f.measured ?? measuredLine(),
    `Each target is a \`tollgate serve\` process of its own: the quickstart as \`npm start\` runs it (\`${startScript()}\`), the PostgreSQL gateway from the sources through tsx and from dist/ (on the image's Node${f.imageNode ? `, ${f.imageNode}` : ''}). RSS is the target's own VmRSS after ${settleMs / 1000} s idle (the quickstart's also ${restMs / 1000} s after the load); "with children" adds the processes it started (tsx's esbuild service, where tsx runs). Load: ${requests.toLocaleString('en')} chat requests (every other one streamed) on ${connections} keep-alive connections. Idle streams: ${streams.toLocaleString('en')} streaming requests held open by the simulator's \`[sim:slow=120000]\` (headers not yet sent: the gateway holds the client's and the upstream's socket and the request), RSS and JS heap while they are open minus before (the JS heap live after full collections).`,
    '',
    head,
    row('quickstart, first start (initdb), idle MiB', mb(250), 'quickstartFirstIdle'),
    row('quickstart, first start, idle, with children MiB', '', 'quickstartFirstIdleTree'),
    row('quickstart, first start, peak while starting (VmHWM) MiB', '', 'quickstartStartPeak'),
    row(`quickstart, ${settleMs / 1000} s after ${requests.toLocaleString('en')} requests MiB`, mb(250), 'quickstartAfterLoad'),
    row(`quickstart, ${restMs / 1000} s after them MiB`, mb(250), 'quickstartAfterRest'),
    row('quickstart, peak by the end of the load (VmHWM) MiB', '', 'quickstartPeak'),
    row('quickstart, restart on its data folder, idle MiB', mb(250), 'quickstartRestartIdle'),
    row('quickstart, requests/s during the load', '', 'quickstartRps'),
    row('quickstart, CPU µs per request during the load (its simulator included)', '', 'quickstartCpuUs'),
    row('PostgreSQL gateway, idle MiB', mb(120), 'postgresIdle'),
    row('PostgreSQL gateway, idle, with children MiB', '', 'postgresIdleTree'),
    row(`PostgreSQL gateway, after ${requests.toLocaleString('en')} requests MiB`, '', 'postgresAfterLoad'),
    row('PostgreSQL gateway, requests/s during the load', '', 'postgresRps'),
    row('per idle stream, RSS KiB', kb(20), 'streamsKiB', 1),
    row('per idle stream, JS heap KiB', '', 'streamsHeapKiB', 1),
    row('PostgreSQL gateway built (dist/, as the image runs it), idle MiB', mb(120), 'builtIdle'),
    row('built, per idle stream, RSS KiB', kb(20), 'builtStreamsKiB', 1),
    row('built, per idle stream, JS heap KiB', '', 'builtStreamsHeapKiB', 1),
    row('bare Node proxy (floor: node:http -> undici Pool, nothing parsed), per idle stream, RSS KiB', '', 'floorStreamsKiB', 1),
    '',
    ...perStreamTable(f, before),
    `Books after each target's clean shutdown: quickstart: ${f.quickstartBooks ?? '—'}; PostgreSQL: ${f.postgresBooks ?? '—'}; built: ${f.builtBooks ?? '—'}.`,
    '',
    readFileSync(fileURLToPath(new URL('./memory/NOTES.md', import.meta.url)), 'utf8').trimEnd(),
  ].join('\n');
}

/**
 * Per idle stream, by target and request body: RSS, and what is live after full collections
 * (the figure that does not move with when V8 last collected).
 */
function perStreamTable(f: Figures, before: Figures | undefined): string[] {
  if (!f.perStream) return [];
  const b = before?.perStream;
  const rows = Object.entries(f.perStream).map(([target, p]) => {
    const was = b?.[target];
    const prior = b ? ` ${was ? `${fx(was.heapKiB + was.buffersKiB, 1)} (${fx(was.heapKiB, 1)} + ${fx(was.buffersKiB, 1)})` : '—'} |` : '';
    return `| ${target} | ${p.bodyBytes.toLocaleString('en')} | ${fx(p.rssKiB, 1)} | ${fx(p.mallocKiB, 1)} |${prior} ${fx(p.heapKiB + p.buffersKiB, 1)} (${fx(p.heapKiB, 1)} + ${fx(p.buffersKiB, 1)}) |`;
  });
  return [
    `Per idle stream (${streams.toLocaleString('en')} held open), KiB: RSS (and of it, glibc's main heap: what native code got from malloc and kept), and what is live after full collections (the JavaScript heap + Buffers' memory, read through the target's inspector), which does not move with when V8 last collected. A "large body" pads the last message to ${largeKiB} KiB more.${f.imageNode ? ` The floor and the built gateway run on Node ${f.imageNode} (the image's), the others on the benchmark's Node.` : ''}`,
    '',
    `| target | request body bytes | RSS KiB | of it glibc's heap KiB |${b ? ` before (${before!.commit}): live KiB (heap + buffers) |` : ''} live KiB (heap + buffers) |`,
    `|---|---:|---:|---:|${b ? '---:|' : ''}---:|`,
    ...rows,
    '',
  ];
}

async function main(): Promise<void> {
  const { execSync } = await import('node:child_process');
  let commit = process.env.BENCH_MEMORY_COMMIT ?? '';
  if (!commit) {
    try {
      commit = execSync('git rev-parse --short HEAD', { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim();
    } catch {
      commit = 'this tree';
    }
  }
  // --from FILE: render figures measured earlier (several runs' JSON merged) instead of measuring.
  const from = process.argv.includes('--from') ? process.argv[process.argv.indexOf('--from') + 1] : undefined;
  const f: Figures = from ? (JSON.parse(readFileSync(from, 'utf8')) as Figures) : { commit };
  if (from) wanted.length = 0;
  if (wanted.includes('floor') || wanted.includes('built'))
    f.imageNode = execSync(`${JSON.stringify(await imageNode())} --version`)
      .toString()
      .trim();
  if (wanted.includes('quickstart')) await quickstart(f);
  if (wanted.includes('floor')) await floor(f);
  if (wanted.includes('postgres')) {
    if (process.env.DATABASE_URL) await postgres(f, process.env.DATABASE_URL, false);
    else log('postgres: skipped (no DATABASE_URL)');
  }
  if (wanted.includes('built')) {
    if (process.env.DATABASE_URL) {
      log('npm run build (dist/)');
      execSync(`${JSON.stringify(process.execPath)} scripts/build.js`, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
      await postgres(f, process.env.DATABASE_URL, true);
    } else log('built: skipped (no DATABASE_URL)');
  }
  if (!from) f.measured = measuredLine();
  if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify(f, null, 2)}\n`);
  const before = process.env.BENCH_MEMORY_BEFORE ? (JSON.parse(readFileSync(process.env.BENCH_MEMORY_BEFORE, 'utf8')) as Figures) : undefined;
  const section = render(f, before);
  if (noWrite) process.stdout.write(`${section}\n`);
  else writeSection(SECTION, section);
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
