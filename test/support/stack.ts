import { compile, type RawResource } from '../../api/snapshot/index.js';
import { MICRO } from '../../api/snapshot/money.js';
import { credit } from '../../proxy/billing/ledger.js';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/front/features.js';
import { startGateway, type Gateway, type StartOptions } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import { readSettings } from '../../kernel/settings.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';

export interface Stack {
  gw: Gateway;
  sim: Simulator;
  source: StaticConfigSource;
  /** Compiles and swaps in new resources (their compile errors throw). */
  apply(resources: object[]): void;
  /** Grants micro-credits to an account (an idempotent ledger row). */
  grant(account: string, micro: bigint, operationId?: string): Promise<void>;
  close(): Promise<void>;
}

export interface StackOptions extends Partial<StartOptions> {
  /**
   * Chat is metered (the real ledger) unless `billing` says otherwise; every account named by an
   * ApiKey in the resources starts with this many micro-credits (default 1000 credits; 0n: none).
   */
  credits?: bigint;
}

let grants = 0;

export function compileOrThrow(resources: object[]) {
  const { config, errors } = compile(resources.map((object): RawResource => ({ object })));
  if (errors.length) throw new Error(`compile errors: ${JSON.stringify(errors)}`);
  return config;
}

/**
 * The simulator and a gateway in this process, on ephemeral loopback ports. `resources` gets the
 * simulator's URL so routes can point at it.
 */
export async function startStack(resources: (simUrl: string) => object[], opts: StackOptions = {}): Promise<Stack> {
  const { credits = 1000n * MICRO, ...start } = opts;
  // The same suites on node:http's front (the default is the lean one, proxy/front/lean.ts):
  // TOLLGATE_TEST_HTTP_FRONT=node. In place: suites change their settings object after the start
  // (secretFromEnv).
  if (process.env.TOLLGATE_TEST_HTTP_FRONT === 'node') start.settings = Object.assign(start.settings ?? readSettings({}), { httpFront: 'node' as const });
  const sim = await startSimulator();
  const manifests = resources(sim.url);
  const source = new StaticConfigSource(compileOrThrow(manifests));
  const gw = await startGateway({
    source,
    port: 0,
    adminPort: 0,
    adminToken: 'test-admin',
    log: createLogger({}, 'silent'),
    billing: defaultBilling,
    features: defaultFeatures,
    ...start,
  });
  const grant = async (account: string, micro: bigint, operationId = `test-grant-${process.pid}-${++grants}`) => {
    await gw.deps.store.tx((q) => credit(q, { account, operationId, amount: micro }));
  };
  if (credits > 0n) {
    const accounts = new Set(manifests.flatMap((m) => ((m as { kind?: string }).kind === 'ApiKey' ? [(m as { spec: { account: string } }).spec.account] : [])));
    for (const a of accounts) await grant(a, credits);
  }
  return {
    gw,
    sim,
    source,
    apply: (r) => source.set(compileOrThrow(r)),
    grant,
    close: async () => {
      await gw.close();
      await sim.close();
    },
  };
}

export async function waitFor(pred: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = performance.now() + ms;
  while (!pred()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
