import { expect } from 'vitest';
import { meteredBilling, type BillingEngine } from '../../proxy/billing/engine.js';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import type { BillingSettings } from '../../proxy/billing/settings.js';
import type { Store } from '../../proxy/store/index.js';
import { disposeStore, type StoreCase } from '../support/stores.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';

export const C = 1_000_000n; // one credit in micro-credits
export const ADMIN = 'test-admin';

export interface BillingStack extends Stack {
  store: Store;
  engine(): BillingEngine;
  /** Stops the gateway (flushing captures, handing leases back) and drops the database. */
  dispose(): Promise<void>;
}

/**
 * A gateway + simulator metered by the real engine on a fresh store of the case (or on a store
 * another stack already uses: a second replica); no credits unless granted.
 */
export async function billingStack(
  sc: StoreCase | { shared: Store },
  resources: (sim: string) => object[],
  settings: Partial<BillingSettings> = {},
): Promise<BillingStack> {
  const store = 'shared' in sc ? sc.shared : await sc.open();
  const owned = !('shared' in sc);
  let engine: BillingEngine | undefined;
  const stack = await startStack(resources, {
    store,
    credits: 0n,
    billing: (deps) => (engine = meteredBilling(deps, settings)),
  });
  let closed = false;
  return {
    ...stack,
    store,
    engine: () => engine!,
    close: async () => {
      if (closed) return;
      closed = true;
      await stack.close();
    },
    dispose: async () => {
      if (!closed) await stack.close();
      closed = true;
      if (owned) await disposeStore(store);
    },
  };
}

export type WrappedStack<W extends Store> = BillingStack & { store: W };

/**
 * One model `m` for `key` (account `acct`, granted `credits`), on a fresh store of the case seen
 * through `wrap` (stalled, failing, slowed): the stack's store is the wrapped one, and dispose()
 * also drops the real one underneath, which a stack handed a store leaves alone.
 */
export async function wrappedStack<W extends Store>(
  sc: StoreCase,
  wrap: (store: Store) => W,
  key: string,
  credits: bigint,
  settings: Partial<BillingSettings> = {},
): Promise<WrappedStack<W>> {
  const real = await sc.open();
  const store = wrap(real);
  const s = await billingStack(
    { shared: store },
    (sim) => [chatRoute('m', `${sim}/v1`), group('g', ['m']), apiKey('k', key, 'g', { account: 'acct' })],
    settings,
  );
  await s.grant('acct', credits, `${key}-grant`);
  return {
    ...s,
    store,
    dispose: async () => {
      await s.dispose();
      await disposeStore(real);
    },
  };
}

/** The account's money as the rows tell it, and the invariant's parts. */
export async function books(store: Store, account: string) {
  const state = await accountState(store, account);
  const grants = await store.query<{ s: unknown }>("SELECT COALESCE(SUM(delta_balance), 0) AS s FROM ledger WHERE account = $1 AND kind = 'grant'", [account]);
  const usage = await store.query<{ s: unknown; n: unknown }>('SELECT COALESCE(SUM(credits), 0) AS s, COUNT(*) AS n FROM usage_records WHERE account = $1', [
    account,
  ]);
  const holds = await store.query<{ n: unknown }>("SELECT COUNT(*) AS n FROM holds WHERE account = $1 AND purpose IN ('request', 'lease')", [account]);
  return {
    ...state,
    grants: BigInt(grants.rows[0]!.s as string),
    usageCredits: BigInt(usage.rows[0]!.s as string),
    usageRecords: Number(usage.rows[0]!.n),
    openHolds: Number(holds.rows[0]!.n),
    violations: await verifyLedger(store),
  };
}

/**
 * The books' invariants once a gateway has stopped: nothing held and no hold open, the balance
 * exactly grants minus usage, and the ledger consistent.
 */
export function expectExactBooks(b: Awaited<ReturnType<typeof books>>): void {
  expect(b.openHolds).toBe(0);
  expect(b.held).toBe(0n);
  expect(b.balance).toBe(b.grants - b.usageCredits);
  expect(b.violations).toEqual([]);
}

export async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000, what = 'condition'): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (performance.now() > end)
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A usage record by request id, once its group commit has landed. */
export async function usageOf(store: Store, requestId: string, ms = 10_000): Promise<Record<string, unknown>> {
  const r = await until(
    () => store.query<Record<string, unknown>>('SELECT * FROM usage_records WHERE request_id = $1', [requestId]),
    (x) => x.rows.length > 0,
    ms,
    `the usage record of ${requestId}`,
  );
  if (r.rows.length !== 1) throw new Error(`request ${requestId} has ${r.rows.length} usage records`);
  return r.rows[0]!;
}

export async function admin(stack: Stack, path: string, init: RequestInit = {}): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const r = await fetch(`${stack.gw.adminUrl}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', ...(init.headers as Record<string, string> | undefined) },
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown>, headers: r.headers };
}
