import { chatFeature } from './chat/feature.js';
import { tasksFeature } from './tasks/feature.js';
import type { FeatureFactory, Gateway } from './gateway.js';
import type { Billing } from './billing/types.js';
import type { GatewayDeps } from './server/deps.js';

/**
 * What `tollgate serve` mounts. Each feature is a folder that contributes routes (and, later,
 * background workers); this list is the one place they are put together.
 */
export const defaultFeatures: FeatureFactory[] = [chatFeature, tasksFeature()];

/**
 * Until the credit ledger lands, chat calls are served without holds or charges. Kept here,
 * not in billing/, so nothing mistakes it for accounting.
 */
export function defaultBilling(_deps: Omit<GatewayDeps, 'billing'>): Billing {
  return {
    holdChat: async () => ({ heldMicro: 0n, settle: async () => {} }),
    close: async () => {},
  };
}

/** One-time set-up after the servers listen (quickstart fixtures). */
export async function afterStart(_gateway: Gateway, _opts: { quickstart: boolean }): Promise<void> {}
