import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../../kernel/log.js';
import { chatCost, verifyLedger, type Billing } from '../billing/index.js';
import type { Store } from '../store/index.js';
import type { RuntimeConfig } from '../config/runtime.js';
import { chatHeld, chatSettled, childSpan, type BackendState } from '../metrics/telemetry.js';
import type { Cooldowns } from '../upstreams/index.js';

/**
 * Billing as the chat path sees it, reporting to the request's telemetry: the hold names the
 * model, group and protocol of the request; the settlement its usage, latency and credits. The
 * chat path itself knows nothing of metrics.
 */
export function observedBilling(billing: Billing): Billing {
  return {
    ...(billing.checkAvailable ? { checkAvailable: (account: string) => billing.checkAvailable!(account) } : {}),
    ...(billing.booksCurrent ? { booksCurrent: () => billing.booksCurrent!() } : {}),
    close: () => billing.close(),
    async holdChat(quote) {
      const charge = await billing.holdChat(quote);
      const scope = chatHeld(quote.scope, quote.model, quote.group, quote.protocol);
      if (!scope) return charge;
      let settled: Promise<void> | undefined;
      return {
        heldMicro: charge.heldMicro,
        // Idempotent like the charge it wraps: counted once.
        settle: (outcome) =>
          (settled ??= (async () => {
            const end = childSpan(scope, 'billing commit');
            try {
              await charge.settle(outcome);
            } catch (err) {
              end((err as Error).message);
              throw err;
            }
            end();
            chatSettled(scope, outcome, outcome.usage ? chatCost(quote.prices, outcome.usage) : 0n);
          })()),
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

/**
 * Checks every `intervalMs` (and once soon after start) that each balance and hold equals the sum
 * of its ledger rows, for the TollgateLedgerInconsistent alert. A check that cannot run (the
 * store away) leaves the last result in place.
 */
export function startLedgerCheck(store: Store, registry: Registry, log: Logger, intervalMs: number): { stop(): Promise<void> } {
  const found = new Gauge({
    name: 'tollgate_ledger_inconsistencies',
    help: 'Balances and holds that differ from the sum of their ledger rows at the last check (0: consistent)',
    registers: [registry],
  });
  const at = new Gauge({ name: 'tollgate_ledger_checked_timestamp_seconds', help: 'When the ledger was last checked (Unix time)', registers: [registry] });
  let running: Promise<void> | undefined;
  const check = () =>
    (running ??= verifyLedger(store)
      .then(
        (violations) => {
          found.set(violations.length);
          at.set(Date.now() / 1000);
          // Accounts and hold ids only: no key, no amount beyond the ledger's own numbers.
          if (violations.length) log.error('ledger check: inconsistent', { count: violations.length, first: violations.slice(0, 5) });
        },
        (err: Error) => log.warn('ledger check failed', { error: err.message }),
      )
      .finally(() => (running = undefined)));
  const first = setTimeout(check, Math.min(intervalMs, 1000));
  const every = setInterval(check, intervalMs);
  first.unref();
  every.unref();
  return {
    async stop() {
      clearTimeout(first);
      clearInterval(every);
      await running;
    },
  };
}
