import { chatCost, type Billing } from '../billing/index.js';
import type { RuntimeConfig } from '../config/runtime.js';
import { chatHeld, chatSettled, type BackendState } from '../metrics/telemetry.js';
import type { Cooldowns } from '../upstreams/index.js';

/**
 * Billing as the chat path sees it, reporting to the request's telemetry: the hold names the
 * model, group and protocol of the request; the settlement its usage, latency and credits. The
 * chat path itself knows nothing of metrics.
 */
export function observedBilling(billing: Billing): Billing {
  return {
    ...(billing.checkAvailable ? { checkAvailable: (account: string) => billing.checkAvailable!(account) } : {}),
    close: () => billing.close(),
    async holdChat(quote) {
      const charge = await billing.holdChat(quote);
      const scope = chatHeld(quote.model, quote.group, quote.protocol);
      if (!scope) return charge;
      let settled: Promise<void> | undefined;
      return {
        heldMicro: charge.heldMicro,
        // Idempotent like the charge it wraps: counted once.
        settle: (outcome) =>
          (settled ??= charge.settle(outcome).then(() => chatSettled(scope, outcome, outcome.usage ? chatCost(quote.prices, outcome.usage) : 0n))),
      };
    },
  };
}

/** The backends of the config in service, each with whether it is cooling down (read at scrape time). */
export function backendStates(config: () => RuntimeConfig | undefined, cooldowns: Cooldowns): () => BackendState[] {
  return () => {
    const out: BackendState[] = [];
    for (const [model, m] of config()?.models ?? []) {
      for (const b of m.backends) out.push({ model, baseURL: b.baseURL, provider: b.provider, cooling: cooldowns.isCooling(b) });
    }
    return out;
  };
}
