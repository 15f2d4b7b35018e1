import { FailureLog } from '../../kernel/failure-log.js';
import type { Logger } from '../../kernel/log.js';
import type { Store } from '../store/index.js';
import { InsufficientCreditsError, release, topUpLease } from './ledger.js';
import type { BillingMetrics } from './metrics.js';
import type { BillingSettings } from './settings.js';

/** This replica's lease on one account and what its requests hold of it. */
export interface AccountLease {
  account: string;
  /** The open lease hold, if any. */
  leaseId: string | undefined;
  /** The lease's deadline as last written to the store (ms); past it, another replica's sweeper may release it. */
  validUntil: number;
  generation: number;
  topups: number;
  /** What the lease has left once every capture settled so far is written. */
  remaining: bigint;
  /** Holds of requests in flight. */
  reserved: bigint;
  inflight: number;
  /** Captures queued or being written for this account. */
  writing: number;
  /** The last request's time (performance.now()): idle this long (idleMs), the lease is handed back. */
  lastUsed: number;
  /** Top-ups and hand-backs of one account run one at a time. */
  chain: Promise<unknown>;
  /**
   * What the account had free when a top-up last failed, and when (performance.now(): a step of the
   * wall clock must not keep refusing an account that has been granted credits): a burst of
   * refusals costs one query.
   */
  refused: { free: bigint; at: number } | undefined;
  /** A top-up ahead of need is under way or failed lately (refillAhead). */
  refilling: boolean;
}

/**
 * Leases, as in telecom online charging: a replica reserves a slice of an account's credits in
 * one store transaction (a 'lease' hold it owns), admits requests against it in memory, tops it
 * up when a request does not fit, renews its deadline while alive, and hands it back when idle or
 * at shutdown. A replica that dies leaves its lease behind; the sweeper releases it.
 */
export class Leases {
  private readonly accounts = new Map<string, AccountLease>();
  private closing = false;
  private readonly refills: FailureLog;
  /** Holds like a request's own left free below which refillAhead tops up: half a slice. */
  private readonly lowWater: bigint;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly settings: BillingSettings,
    /** The owner of this replica's leases. */
    private readonly replica: string,
    private readonly metrics: BillingMetrics | undefined,
  ) {
    this.refills = new FailureLog(log, 'billing lease top-up ahead of need');
    this.lowWater = settings.sliceFactor > 2n ? settings.sliceFactor / 2n : 1n;
  }

  /** The account's lease state if this replica has one, without creating it. */
  peek(account: string): AccountLease | undefined {
    return this.accounts.get(account);
  }

  of(account: string): AccountLease {
    let a = this.accounts.get(account);
    if (!a) {
      a = {
        account,
        leaseId: undefined,
        validUntil: 0,
        generation: 0,
        topups: 0,
        remaining: 0n,
        reserved: 0n,
        inflight: 0,
        writing: 0,
        lastUsed: performance.now(),
        chain: Promise.resolve(),
        refused: undefined,
        refilling: false,
      };
      this.accounts.set(account, a);
    }
    return a;
  }

  /** Whether the lease's deadline is older than two thirds of a lease: another replica's sweeper may soon take it. */
  stale(acct: AccountLease, now = Date.now()): boolean {
    return acct.leaseId !== undefined && now > acct.validUntil - this.settings.leaseMs / 3;
  }

  /**
   * Grows this replica's lease on the account so that `need` (a top-up ahead of need, from
   * refillAhead), else the hold `amount`, is free: what is missing plus a slice (sliceFactor x
   * amount or twice the holds in flight, whichever is more, but at most half of what the account
   * has left, so sibling replicas are not starved). Throws InsufficientCreditsError when the
   * account cannot cover even what is missing.
   */
  topUp(acct: AccountLease, amount: bigint, need?: bigint): Promise<void> {
    return this.serial(acct, async () => {
      const shortfall = (need ?? amount) - (acct.remaining - acct.reserved);
      if (shortfall <= 0n) return;
      const refused = acct.refused;
      if (refused && shortfall > refused.free && performance.now() - refused.at < this.settings.refusalMemoryMs)
        throw new InsufficientCreditsError(acct.account, amount);
      const expiresAt = new Date(Date.now() + this.settings.leaseMs);
      // Sized to the demand: at least sliceFactor holds, and twice what is in flight now, so a
      // busy account tops up rarely instead of once every few requests. The store takes the
      // shortfall plus this slice, or plus half of what the account has free beyond it if less.
      const inFlight = 2n * (acct.reserved + amount);
      const slice = amount * this.settings.sliceFactor > inFlight ? amount * this.settings.sliceFactor : inFlight;
      const n = acct.topups + 1;
      const newLease = `lease:${this.replica}:${acct.account}:${acct.generation + 1}`;
      // One statement: seven to nine round trips as a transaction of separate statements.
      const r = await topUpLease(this.store, {
        account: acct.account,
        grow: acct.leaseId ? { leaseId: acct.leaseId, topUpId: `${acct.leaseId}:topup:${n}` } : undefined,
        newLeaseId: newLease,
        shortfall,
        slice,
        expiresAt,
        owner: this.replica,
      });
      if (r.outcome === 'refused') {
        acct.refused = { free: r.free, at: performance.now() };
        throw new InsufficientCreditsError(acct.account, amount);
      }
      const take = r.took;
      const out =
        r.outcome === 'grown'
          ? { take, leaseId: acct.leaseId, topups: n, lost: false }
          : { take, leaseId: newLease, topups: 0, lost: acct.leaseId !== undefined };
      if (out.leaseId !== acct.leaseId) {
        // A new lease: the old one (if any) was released by the sweeper and has nothing left.
        if (out.lost) this.log.warn('billing lease was released while in use; a new one was taken', { account: acct.account });
        acct.generation++;
        acct.leaseId = out.leaseId;
        acct.remaining = 0n;
      }
      this.metrics?.topups.inc({ when: need === undefined ? 'on_request' : 'ahead' });
      acct.validUntil = expiresAt.getTime();
      acct.topups = out.topups;
      acct.remaining += out.take;
      acct.refused = undefined;
    });
  }

  /**
   * Once a request admitted for `amount` leaves less than half a slice of such holds free, tops
   * the lease up in the background, as online charging asks for more quota at a threshold
   * before the grant is spent: the requests after it are admitted from memory instead of one in
   * a few hundred waiting for the store on its way to the first byte. One at a time per account;
   * after a failure the next one waits refusalMemoryMs, and a request that does not fit
   * meanwhile tops up on its own path, as it always did.
   */
  refillAhead(acct: AccountLease, amount: bigint): void {
    if (amount <= 0n || acct.refilling || this.closing) return;
    const low = amount * this.lowWater;
    if (acct.remaining - acct.reserved >= low) return;
    const r = acct.refused;
    if (r && performance.now() - r.at < this.settings.refusalMemoryMs) return;
    acct.refilling = true;
    this.topUp(acct, amount, low).then(
      () => {
        this.refills.succeeded();
        acct.refilling = false;
      },
      (err: Error) => {
        // The account is short: the request that does not fit gets its 402 as before.
        if (!(err instanceof InsufficientCreditsError)) this.refills.failed(err);
        setTimeout(() => (acct.refilling = false), this.settings.refusalMemoryMs).unref();
      },
    );
  }

  /** Pushes the lease's deadline forward now (throws if the store cannot be reached); a lease the sweeper took is dropped. */
  renew(acct: AccountLease): Promise<void> {
    return this.serial(acct, async () => {
      const leaseId = acct.leaseId;
      if (!leaseId || !this.stale(acct)) return;
      const until = Date.now() + this.settings.leaseMs;
      const r = await this.store.query('UPDATE holds SET expires_at = $2 WHERE hold_id = $1 RETURNING hold_id', [leaseId, new Date(until).toISOString()]);
      if (acct.leaseId !== leaseId) return;
      if (r.rows.length > 0) acct.validUntil = until;
      else {
        acct.leaseId = undefined;
        acct.remaining = 0n;
      }
    });
  }

  /** Keeps live leases from expiring, notices leases the sweeper took, hands back idle ones. */
  async upkeep(): Promise<void> {
    // Every lease of this replica belongs to an account in the map (entered before its lease is
    // taken, left only once it has none): an idle replica has nothing to renew and asks nothing.
    if (this.accounts.size === 0) return;
    const until = Date.now() + this.settings.leaseMs;
    const live = await this.store.query<{ hold_id: string }>(`UPDATE holds SET expires_at = $2 WHERE owner = $1 AND purpose = 'lease' RETURNING hold_id`, [
      this.replica,
      new Date(until).toISOString(),
    ]);
    const ids = new Set(live.rows.map((r) => r.hold_id));
    const now = performance.now();
    for (const acct of [...this.accounts.values()]) {
      if (acct.leaseId && ids.has(acct.leaseId)) acct.validUntil = Math.max(acct.validUntil, until);
      if (acct.leaseId && !ids.has(acct.leaseId) && acct.writing === 0) {
        await this.serial(acct, async () => {
          const open = await this.store.query('SELECT 1 FROM holds WHERE hold_id = $1', [acct.leaseId]);
          if (open.rows.length === 0) {
            acct.leaseId = undefined;
            acct.remaining = 0n;
          }
        });
      }
      if (acct.inflight === 0 && acct.writing === 0 && now - acct.lastUsed >= this.settings.idleMs) {
        await this.serial(acct, async () => {
          if (acct.inflight !== 0 || acct.writing !== 0) return;
          await this.handBack(acct);
          if (acct.inflight === 0 && acct.writing === 0 && !acct.leaseId) this.accounts.delete(acct.account);
        });
      }
    }
  }

  /** Hands every lease back (shutdown). */
  async handBackAll(): Promise<void> {
    this.closing = true;
    for (const acct of this.accounts.values()) await this.serial(acct, () => this.handBack(acct));
  }

  /** Releases the account's lease (everything it has left goes back to the account). */
  private async handBack(acct: AccountLease): Promise<void> {
    const leaseId = acct.leaseId;
    if (!leaseId) return;
    // Detached before the release is written: a request admitted meanwhile would otherwise be
    // reserved against credits on their way back to the account (and its capture find the lease
    // gone). With nothing left in memory it tops up, which waits for this hand-back, on a new lease.
    const remaining = acct.remaining;
    acct.leaseId = undefined;
    acct.remaining = 0n;
    try {
      await this.store.tx((q) => release(q, { holdId: leaseId, meta: { reason: this.closing ? 'shutdown' : 'idle' } }));
    } catch (err) {
      // Not released: the lease is still this replica's.
      if (acct.leaseId === undefined) [acct.leaseId, acct.remaining] = [leaseId, remaining];
      throw err;
    }
    acct.refused = undefined;
  }

  private serial<T>(acct: AccountLease, fn: () => Promise<T>): Promise<T> {
    const run = acct.chain.then(fn, fn);
    acct.chain = run.catch(() => {});
    return run;
  }
}
