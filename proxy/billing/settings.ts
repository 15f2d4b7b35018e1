import { envMillis, envSeconds as seconds } from '../config/env.js';

/** Tunables of metered billing; defaults, then environment (TOLLGATE_BILLING_*), then code. */
export interface BillingSettings {
  /** A lease's deadline; a live replica renews it every third of this. The sweeper releases a lease past it. */
  leaseMs: number;
  /** A lease unused this long is handed back to the account. */
  idleMs: number;
  /** How often each replica runs the sweeper. */
  sweepIntervalMs: number;
  /** A top-up reserves what the request lacks plus this many times its hold, or twice the holds in flight if more (at most half of what the account has left). */
  sliceFactor: bigint;
  /** Most captures written by one group commit. */
  maxBatch: number;
  /**
   * After the account could not cover a top-up, requests needing more than it had are refused
   * without asking the store again for this long (a burst of 402s costs one query). A grant made
   * meanwhile is seen when it ends.
   */
  refusalMemoryMs: number;
  /** How long a group commit waits for more settlements while other requests are in flight. */
  commitLingerMs: number;
  /**
   * Where a settled request's charge becomes durable before its last byte: a local directory
   * (see journal.ts; one per replica, on storage that outlives the process) with the store
   * written behind it, or undefined to commit to the store on the request's path.
   */
  journalDir: string | undefined;
  /** With a journal: how long the store write waits to gather settled requests into one commit. */
  journalFlushMs: number;
}

export const DEFAULT_BILLING_SETTINGS: BillingSettings = {
  leaseMs: 30_000,
  idleMs: 10_000,
  sweepIntervalMs: 5_000,
  sliceFactor: 8n,
  maxBatch: 500,
  refusalMemoryMs: 250,
  commitLingerMs: 3,
  journalDir: undefined,
  journalFlushMs: 100,
};

export function billingSettings(env: NodeJS.ProcessEnv = process.env, overrides: Partial<BillingSettings> = {}): BillingSettings {
  const s = { ...DEFAULT_BILLING_SETTINGS };
  const lease = seconds(env, 'TOLLGATE_BILLING_LEASE_SECONDS');
  const idle = seconds(env, 'TOLLGATE_BILLING_IDLE_SECONDS');
  const sweep = seconds(env, 'TOLLGATE_BILLING_SWEEP_SECONDS');
  if (lease !== undefined) s.leaseMs = lease;
  if (idle !== undefined) s.idleMs = idle;
  if (sweep !== undefined) s.sweepIntervalMs = sweep;
  const linger = envMillis(env, 'TOLLGATE_BILLING_COMMIT_LINGER_MS');
  if (linger !== undefined) s.commitLingerMs = linger;
  const flush = envMillis(env, 'TOLLGATE_BILLING_JOURNAL_FLUSH_MS');
  if (flush !== undefined) s.journalFlushMs = flush;
  if (env.TOLLGATE_BILLING_JOURNAL_DIR) s.journalDir = env.TOLLGATE_BILLING_JOURNAL_DIR;
  return { ...s, ...overrides };
}
