/** Tunables of metered billing; defaults, then environment (TOLLGATE_BILLING_*, read by kernel/settings.ts), then code. */
export interface BillingSettings {
  /** A lease's deadline; a live replica renews it every third of this. The sweeper releases a lease past it. */
  leaseMs: number;
  /** A lease unused this long is handed back to the account. */
  idleMs: number;
  /** How often each replica runs the sweeper. */
  sweepIntervalMs: number;
  /** How often each replica folds the usage rows appended since (migration 031) into the hourly and daily rollups. */
  rollupFoldMs: number;
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
  /**
   * How long a group commit waits for more settlements while other requests are in flight. 0:
   * it starts once the event loop has run its pending I/O; what settles while it is written
   * goes in the next one, which already makes batches grow with the load.
   */
  commitLingerMs: number;
  /**
   * Where a settled request's charge becomes durable before its last byte: a local directory
   * (see journal.ts; one per replica, on storage that outlives the process) with the store
   * written behind it; undefined: the journal table on PostgreSQL (below), else the store's commit
   * on the request's path.
   */
  journalDir: string | undefined;
  /**
   * The journal as a table in PostgreSQL instead (see table-journal.ts): durable as long as the
   * database, at about a quarter of a commit's cost on the request's path. Unset: on PostgreSQL
   * without a directory, the table; false commits to the store on the request's path.
   */
  journalTable: boolean | undefined;
  /** With a journal: how long the store write waits to gather settled requests into one commit. */
  journalFlushMs: number;
}

export const DEFAULT_BILLING_SETTINGS: BillingSettings = {
  leaseMs: 30_000,
  idleMs: 10_000,
  sweepIntervalMs: 5_000,
  rollupFoldMs: 1_000,
  sliceFactor: 8n,
  maxBatch: 500,
  refusalMemoryMs: 250,
  commitLingerMs: 0,
  journalDir: undefined,
  journalTable: undefined,
  journalFlushMs: 100,
};

/** Defaults, then each layer in turn (the environment's settings, then code overrides). */
export function billingSettings(...layers: Partial<BillingSettings>[]): BillingSettings {
  return Object.assign({}, DEFAULT_BILLING_SETTINGS, ...layers) as BillingSettings;
}
