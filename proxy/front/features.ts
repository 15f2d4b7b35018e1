import { MICRO } from '../../api/snapshot/money.js';
import { billingFeature } from '../admin/billing.js';
import { consoleFeature } from '../admin/console.js';
import { meteredBilling } from '../billing/index.js';
import { credit } from '../billing/index.js';
import { chatFeature } from '../chat/feature.js';
import { tasksFeature } from '../tasks/feature.js';
import type { FeatureFactory, Gateway } from './gateway.js';
import type { Billing } from '../billing/index.js';
import type { GatewayDeps } from '../http/deps.js';

/**
 * What `tollgate serve` mounts. Each feature is a folder that contributes routes (and, later,
 * background workers); this list is the one place they are put together.
 */
export const defaultFeatures: FeatureFactory[] = [chatFeature, tasksFeature(), billingFeature, consoleFeature];

/** Chat is metered: leases, holds and group-committed captures (proxy/billing/engine.ts). */
export function defaultBilling(deps: Omit<GatewayDeps, 'billing'>): Billing {
  return meteredBilling(deps);
}

/** The quickstart's demo account starts with this many credits, granted once per database. */
export const QUICKSTART_GRANT_CREDITS = 1000n;

/** One-time set-up after the servers listen (quickstart fixtures). */
export async function afterStart(gateway: Gateway, opts: { quickstart: boolean }): Promise<void> {
  if (!opts.quickstart) return;
  // A fixed operation id: restarting the quickstart does not grant again.
  const granted = await gateway.deps.store.tx((q) =>
    credit(q, { account: 'demo', operationId: 'quickstart:demo:initial-grant', amount: QUICKSTART_GRANT_CREDITS * MICRO, meta: { via: 'quickstart' } }),
  );
  if (granted) gateway.deps.log.info('quickstart: granted credits', { account: 'demo', credits: QUICKSTART_GRANT_CREDITS.toString() });
}
