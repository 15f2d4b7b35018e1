/**
 * The processes under test, each in its own Node process so the load generator, the simulator
 * and the gateway do not share an event loop: `tsx bench/chat/servers.ts sim|floor|gateway SIM_URL`.
 * Prints one JSON line `{"url": ...}` on stdout when listening.
 */
import { randomBytes } from 'node:crypto';
import { MICRO } from '../../api/snapshot/money.js';
import { openStore } from '../../proxy/store/index.js';
import { compile, type RawResource } from '../../api/snapshot/index.js';
import { credit } from '../../proxy/billing/ledger.js';
import type { Billing } from '../../proxy/billing/types.js';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/front/features.js';
import { startGateway } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import { startSimulator } from '../../simulator/index.js';
import { BENCH_KEY_HASH } from './config.js';
import { startFloor } from './floor.js';

const API = 'tollgate.dev/v1alpha1';

const noBilling = (): Billing => ({ holdChat: async () => ({ heldMicro: 0n, settle: async () => {} }), close: async () => {} });

async function main(): Promise<void> {
  const [what, simUrl] = process.argv.slice(2);
  if (what === 'floor') {
    const floor = await startFloor(simUrl!);
    exitOnSignal(() => floor.close());
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
  // BENCH_BILLING=none isolates the chat path (a billing that holds and charges nothing).
  const billing = process.env.BENCH_BILLING === 'none' ? noBilling : defaultBilling;
  // BENCH_DATABASE_URL: the cluster's shape, billing on PostgreSQL (a schema of its own, dropped at exit).
  const pgUrl = process.env.BENCH_DATABASE_URL;
  const schema = `bench_chat_${randomBytes(4).toString('hex')}`;
  const store = pgUrl ? await openStore({ databaseUrl: pgUrl, schema }) : undefined;
  const gw = await startGateway({
    ...(store ? { store } : {}),
    source: new StaticConfigSource(config),
    port: 0,
    adminPort: 0,
    log: createLogger({}, 'error'),
    billing,
    features: defaultFeatures,
  });
  await gw.deps.store.tx((q) => credit(q, { account: 'bench', operationId: 'bench-grant', amount: 1_000_000_000n * MICRO }));
  exitOnSignal(async () => {
    await gw.close();
    if (store) {
      await store.query(`DROP SCHEMA "${schema}" CASCADE`);
      await store.close();
    }
  });
  process.stdout.write(`${JSON.stringify({ url: gw.url })}\n`);
}

/** A clean exit on SIGTERM/SIGINT (so `node --cpu-prof` writes its profile). */
function exitOnSignal(close: () => Promise<void>): void {
  const stop = () => void close().finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
