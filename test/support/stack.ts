import { compile, type RawResource } from '../../api/snapshot/index.js';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/features.js';
import { startGateway, type Gateway, type StartOptions } from '../../proxy/gateway.js';
import { createLogger } from '../../proxy/server/log.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';

export interface Stack {
  gw: Gateway;
  sim: Simulator;
  source: StaticConfigSource;
  /** Compiles and swaps in new resources (their compile errors throw). */
  apply(resources: object[]): void;
  close(): Promise<void>;
}

export function compileOrThrow(resources: object[]) {
  const { config, errors } = compile(resources.map((object): RawResource => ({ object })));
  if (errors.length) throw new Error(`compile errors: ${JSON.stringify(errors)}`);
  return config;
}

/**
 * The simulator and a gateway in this process, on ephemeral loopback ports. `resources` gets the
 * simulator's URL so routes can point at it.
 */
export async function startStack(resources: (simUrl: string) => object[], opts: Partial<StartOptions> = {}): Promise<Stack> {
  const sim = await startSimulator();
  const source = new StaticConfigSource(compileOrThrow(resources(sim.url)));
  const gw = await startGateway({
    source,
    port: 0,
    adminPort: 0,
    adminToken: 'test-admin',
    log: createLogger({}, 'silent'),
    billing: defaultBilling,
    features: defaultFeatures,
    ...opts,
  });
  return {
    gw,
    sim,
    source,
    apply: (r) => source.set(compileOrThrow(r)),
    close: async () => {
      await gw.close();
      await sim.close();
    },
  };
}

export async function waitFor(pred: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
