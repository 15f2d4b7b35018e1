/**
 * The processes under test, each in its own Node process so the load generator, the simulator
 * and the gateway do not share an event loop: `tsx bench/chat/servers.ts sim|floor|gateway SIM_URL`.
 * Prints one JSON line `{"url": ...}` on stdout when listening (a gateway adds `"admin"`, the
 * port of its /metrics).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session } from 'node:inspector';
import { MICRO } from '../../api/snapshot/money.js';
import { openStore } from '../../proxy/store/index.js';
import { compile, type RawResource } from '../../api/snapshot/index.js';
import { credit } from '../../proxy/billing/ledger.js';
import type { Billing } from '../../proxy/billing/types.js';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/front/features.js';
import { startGateway, type FeatureFactory } from '../../proxy/front/gateway.js';
import { sendJson } from '../../proxy/http/send.js';
import { createLogger } from '../../kernel/log.js';
import { readSettings } from '../../kernel/settings.js';
import { startSimulator } from '../../simulator/index.js';
import { readBooks } from './books.js';
import { BENCH_KEY_HASH } from './config.js';
import { startFloor } from './floor.js';
import { startFloorPart, type FloorPart } from './floor-parts.js';
import { FloorJournal } from './floor-journal.js';

const API = 'tollgate.dev/v1alpha1';
/** What the bench account is granted once, at start. */
const GRANT = 1_000_000_000n * MICRO;

/**
 * GET /bench/books on the admin port: the bench account's books once this replica's journaled
 * charges have reached them, read by `npm run bench` after every round of a metered gateway.
 */
const booksFeature: FeatureFactory = (deps) => ({
  routes: [],
  adminRoutes: [
    {
      method: 'GET',
      path: '/bench/books',
      shape: 'openai',
      auth: 'none',
      handler: async (ctx) => {
        await deps.billing.booksCurrent?.();
        sendJson(ctx.res, 200, await readBooks(deps.store, 'bench', GRANT));
      },
    },
  ],
});

/**
 * A billing that holds and charges nothing. With a `journal` (the no-billing-pg target) each
 * answer's end still waits for a line committed to PostgreSQL, as the durable floor's does: the
 * chat path with its store's wait and without billing's own work, for telling the two apart.
 */
const noBilling = (journal?: FloorJournal) => (): Billing => {
  let answers = 0;
  const settle = journal ? () => journal.append(`{"o":"no-billing:${++answers}","a":"bench","m":"sim-gpt","c":"0","t":${Date.now()}}`) : async () => {};
  return { holdChat: async () => ({ heldMicro: 0n, settle }), close: async () => {} };
};

async function main(): Promise<void> {
  const [what, simUrl] = process.argv.slice(2);
  if (what === 'floor') {
    // BENCH_FLOOR_CONNECTIONS: bench:memory holds thousands of streams open through it.
    // BENCH_FLOOR_DATABASE_URL: the durable floor (an insert committed before each answer's end).
    const journal = process.env.BENCH_FLOOR_DATABASE_URL ? await FloorJournal.open(process.env.BENCH_FLOOR_DATABASE_URL) : undefined;
    // BENCH_FLOOR_PART: the floor taken apart (floor-parts.ts).
    const part = process.env.BENCH_FLOOR_PART as FloorPart | undefined;
    const floor = part ? await startFloorPart(part, simUrl!) : await startFloor(simUrl!, Number(process.env.BENCH_FLOOR_CONNECTIONS ?? 256), journal);
    exitOnSignal(async () => {
      await floor.close();
      await journal?.close();
    });
    process.stdout.write(`${JSON.stringify({ url: floor.url })}\n`);
    return;
  }
  if (what === 'sim') {
    const sim = await startSimulator();
    // The recorder keeps the last 1000 requests whole: fine for tests, noise for a benchmark.
    sim.recorder.clear();
    setInterval(() => sim.recorder.clear(), 1000).unref();
    exitOnSignal(() => sim.close());
    process.stdout.write(`${JSON.stringify({ url: sim.url })}\n`);
    return;
  }
  const resources = [
    {
      apiVersion: API,
      kind: 'ModelRoute',
      metadata: { name: 'sim-gpt' },
      spec: {
        type: 'chat',
        backends: [{ provider: 'openai', baseURL: `${simUrl}/v1`, model: 'gpt-sim' }],
        pricing: { inputPerMillion: '0.50', outputPerMillion: '1.50' },
      },
    },
    // The translation benchmark's models, each served through one protocol only.
    ...(
      [
        ['sim-chat-only', { provider: 'openai-compatible', baseURL: `${simUrl}/v1`, model: 'gpt-sim' }],
        ['sim-responses-only', { provider: 'openai-compatible', baseURL: `${simUrl}/v1`, model: 'gpt-sim', paths: { responses: '/responses' } }],
        ['sim-claude', { provider: 'anthropic', baseURL: simUrl, model: 'claude-sim' }],
      ] as const
    ).map(([name, backend]) => ({
      apiVersion: API,
      kind: 'ModelRoute',
      metadata: { name },
      spec: { type: 'chat', backends: [backend], pricing: { inputPerMillion: '0.50', outputPerMillion: '1.50' } },
    })),
    { apiVersion: API, kind: 'Group', metadata: { name: 'bench' }, spec: { models: ['sim-gpt', 'sim-chat-only', 'sim-responses-only', 'sim-claude'] } },
    { apiVersion: API, kind: 'ApiKey', metadata: { name: 'bench' }, spec: { group: 'bench', account: 'bench', keyHash: BENCH_KEY_HASH } },
  ];
  const { config, errors } = compile(resources.map((object): RawResource => ({ object })));
  if (errors.length) throw new Error(JSON.stringify(errors));
  // The product's own path: metered billing on in-memory PGlite, every feature mounted.
  // BENCH_BILLING=none isolates the chat path (a billing that holds and charges nothing); with
  // BENCH_FLOOR_DATABASE_URL each answer's end waits for the durable floor's insert all the same.
  const floorJournal =
    process.env.BENCH_BILLING === 'none' && process.env.BENCH_FLOOR_DATABASE_URL ? await FloorJournal.open(process.env.BENCH_FLOOR_DATABASE_URL) : undefined;
  const metered = process.env.BENCH_BILLING !== 'none';
  const billing = metered ? defaultBilling : noBilling(floorJournal);
  // BENCH_DATABASE_URL: the cluster's shape, billing on PostgreSQL (a schema of its own, dropped at exit).
  const pgUrl = process.env.BENCH_DATABASE_URL;
  const schema = `bench_chat_${randomBytes(4).toString('hex')}`;
  // BENCH_DATA=disk: the quickstart's shape, PGlite in a data folder with the billing journal
  // (its O_DSYNC write is the charge's durable point), in its worker thread unless
  // BENCH_PGLITE_THREAD=0; else PGlite in memory.
  const dataDir = !pgUrl && process.env.BENCH_DATA === 'disk' ? mkdtempSync(join(tmpdir(), 'tollgate-bench-data-')) : undefined;
  // BENCH_JOURNAL=1 with PostgreSQL: the billing journal as the chart's `proxy.billingJournal` sets it.
  const journalDir = pgUrl && process.env.BENCH_JOURNAL === '1' ? mkdtempSync(join(tmpdir(), 'tollgate-bench-journal-')) : undefined;
  const store = pgUrl
    ? await openStore({ databaseUrl: pgUrl, schema })
    : dataDir
      ? await openStore({ dataDir: join(dataDir, 'pg'), thread: process.env.BENCH_PGLITE_THREAD !== '0' })
      : undefined;
  const gw = await startGateway({
    ...(store ? { store } : {}),
    ...(dataDir ? { dataDir: join(dataDir, 'pg') } : {}),
    // The benchmark's own TOLLGATE_* settings too (e.g. TOLLGATE_BILLING_COMMIT_LINGER_MS), so a run can try one.
    settings: readSettings({ ...process.env, ...(dataDir || journalDir ? { TOLLGATE_BILLING_JOURNAL_DIR: journalDir ?? join(dataDir!, 'journal') } : {}) }),
    source: new StaticConfigSource(config),
    port: 0,
    adminPort: 0,
    log: createLogger({}, 'error'),
    billing,
    features: metered ? [...defaultFeatures, booksFeature] : defaultFeatures,
  });
  await gw.deps.store.tx((q) => credit(q, { account: 'bench', operationId: 'bench-grant', amount: GRANT }));
  exitOnSignal(async () => {
    await gw.close();
    await floorJournal?.close();
    if (store) {
      try {
        // Every lease handed back: the books as the next replica would find them (none printed: the run fails).
        if (metered) process.stdout.write(`${JSON.stringify({ books: await readBooks(store, 'bench', GRANT) })}\n`);
      } finally {
        if (pgUrl) await store.query(`DROP SCHEMA "${schema}" CASCADE`);
        await store.close();
      }
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    if (journalDir) rmSync(journalDir, { recursive: true, force: true });
  });
  process.stdout.write(`${JSON.stringify({ url: gw.url, admin: gw.adminUrl })}\n`);
}

/**
 * BENCH_CPU_PROFILE=FILE: a CPU profile of the load only, not of start-up (PGlite's wasm start
 * dominates a whole-process profile): SIGUSR2 starts the profiler, the exit signal writes FILE.
 */
const profile = process.env.BENCH_CPU_PROFILE ? profiler(process.env.BENCH_CPU_PROFILE) : undefined;

function profiler(file: string): () => Promise<void> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));
  let started: Promise<unknown> | undefined;
  process.on('SIGUSR2', () => {
    started ??= post('Profiler.enable').then(() => post('Profiler.setSamplingInterval', { interval: 100 }).then(() => post('Profiler.start')));
  });
  return async () => {
    if (!started) return;
    await started;
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    writeFileSync(file, JSON.stringify(profile));
  };
}

/** A clean exit on SIGTERM/SIGINT (so a CPU profile is written). */
function exitOnSignal(close: () => Promise<void>): void {
  const stop = () => void (profile ? profile() : Promise.resolve()).then(close).finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
