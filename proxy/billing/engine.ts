import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Settings } from '../../kernel/settings.js';
import { GatewayError } from '../../kernel/errors.js';
import type { Registry } from 'prom-client';
import { FailureLog } from '../../kernel/failure-log.js';
import type { Logger } from '../../kernel/log.js';
import type { Store } from '../store/index.js';
import { commitLine } from './commit.js';
import { GroupCommit } from './group-commit.js';
import { BillingJournal, LOCK_STALE_MS, type ChargeJournal, type JournalSegment } from './journal.js';
import { Leases, type AccountLease } from './leases.js';
import { InsufficientCreditsError, SpendLimitError } from './ledger.js';
import { big } from './money.js';
import { billingMetrics, type BillingMetrics } from './metrics.js';
import { chatCost, chatHold } from './pricing.js';
import { billingSettings, type BillingSettings } from './settings.js';
import { sweepExpiredHolds } from './sweeper.js';
import { foldUsageRollups } from './usage.js';
import { SpendLimits, type KeySpend } from './spend-limits.js';
import { foldJournalTable, journalTableHasRows, TableJournal } from './table-journal.js';
import type { Billing, ChatCharge, ChatQuote, ChatSettlement } from './types.js';

/**
 * Metered chat billing, shaped like telecom online charging. A replica leases a slice of an
 * account's credits in one store transaction (a 'lease' hold it owns), admits requests against it
 * in memory (the check and the reservation are one synchronous step, so concurrency cannot
 * overspend), tops the lease up in the background when it runs low (on a request's path only when
 * one does not fit), and hands it back when idle or at shutdown. Settled requests are written in
 * group commits (one transaction for every capture and usage record that queued while the previous
 * one ran) and settle() resolves only once its capture is durable (in the store, or first in a
 * journal that the store is written behind: a table in PostgreSQL, PostgreSQL's default, or a local
 * directory), so the chat handler sends a stream's last event after the charge. A replica that dies
 * leaves its lease behind: its deadline stops moving and the sweeper, which every replica runs,
 * releases it.
 */

/** The longest a reader of the books waits for this replica's journaled charges to reach them. */
const BOOKS_WAIT_MS = 2_000;

export class BillingEngine implements Billing {
  readonly replica = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly opPrefix = `${randomBytes(9).toString('base64url')}.`;
  private opCount = 0;
  private readonly leases: Leases;
  private readonly spend: SpendLimits;
  private readonly commits: GroupCommit;
  private readonly timers: NodeJS.Timeout[] = [];
  /** What the timers started and has not finished. */
  private readonly running = new Set<Promise<unknown>>();
  private closing: Promise<void> | undefined;
  /** Chat requests holding credits on this replica (admitted, not yet settled). */
  private inflight = 0;

  private readonly metrics: BillingMetrics | undefined;
  private readonly journal: ChargeJournal | undefined;
  /** The journal when it is a local directory (it has a lock to touch and segments to replay). */
  private readonly local: BillingJournal | undefined;
  /** Whether sweeps fold the journal table: always with the table journal, else from start until it is empty. */
  private foldTable = true;
  /** Replay of what a previous process left in the journal, then the first sweep. */
  private readonly started: Promise<void>;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    readonly settings: BillingSettings = billingSettings(),
    registry?: Registry,
  ) {
    this.metrics = registry ? billingMetrics(registry) : undefined;
    this.leases = new Leases(store, log, settings, this.replica, this.metrics);
    this.spend = new SpendLimits(store);
    // A tick while the previous one's work is still under way is skipped: against a slow store,
    // work would otherwise pile up, one query a tick, each holding a pool connection.
    // A store that stays down is logged as one outage per timer, not a line per tick.
    const every = (ms: number, fn: () => unknown, what: string) => {
      let busy = false;
      const failures = new FailureLog(this.log, `billing ${what}`);
      const t = setInterval(() => {
        if (busy) return;
        busy = true;
        const run = Promise.resolve()
          .then(fn)
          .then(
            () => failures.succeeded(),
            (err: Error) => failures.failed(err),
          )
          .finally(() => (busy = false));
        this.running.add(run);
        void run.finally(() => this.running.delete(run));
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    every(Math.max(50, Math.min(settings.leaseMs / 3, settings.idleMs / 2)), () => this.tick(), 'lease upkeep');
    every(settings.sweepIntervalMs, () => this.sweep(), 'sweeper');
    // Off the commit path: the two upserts per group commit were a quarter of PostgreSQL's work in it.
    // Folds that find nothing space out to every 2, 4, then 8 intervals, so an idle gateway rarely
    // queries for it; readers add the pending rows themselves, so no figure waits on a fold.
    let emptyFolds = 0;
    let skip = 0;
    every(
      settings.rollupFoldMs,
      async () => {
        if (skip > 0) return void skip--;
        const moved = await foldUsageRollups(store);
        emptyFolds = moved > 0 ? 0 : Math.min(emptyFolds + 1, 3);
        skip = 2 ** emptyFolds - 1;
      },
      'usage rollup fold',
    );
    // Opened here, synchronously, so a directory another live process holds stops the start.
    if (settings.journalDir && settings.journalTable) throw new Error('the billing journal is either a directory or a table, not both');
    this.local = settings.journalDir ? new BillingJournal(settings.journalDir, undefined, store.durable) : undefined;
    // PostgreSQL's default: a commit on the request's path costs about four times the table's insert.
    const table = (settings.journalTable ?? (store.kind === 'postgres' && !settings.journalDir)) ? new TableJournal(store) : undefined;
    if (table)
      table.onError = (err) =>
        this.log.warn('billing journal table: rows the store has could not be deleted; the sweeper folds them again', { error: err.message });
    this.journal = this.local ?? table;
    this.commits = new GroupCommit(
      store,
      log,
      settings,
      this.journal,
      this.metrics,
      () => this.inflight,
      (limitedKeys) => this.spend.afterCommit(limitedKeys),
    );
    if (this.local) {
      const j = this.local;
      j.onError = (op, segment, err) =>
        this.log.warn(`billing journal could not ${op} a segment the store has; the next start replays it`, { segment, error: err.message });
      every(LOCK_STALE_MS / 6, () => j.touch(), 'journal lock touch');
    }
    // At start too: a restart on the same database resolves what the previous process left,
    // after the charges it left in the journal are in (its leases may still take them).
    this.started = this.replayJournal()
      .then(() => this.sweep())
      .then(
        () => {},
        (err: Error) => this.log.error('billing start-up recovery failed', { error: err.message }),
      );
  }

  async checkAvailable(account: string): Promise<void> {
    const acct = this.leases.peek(account);
    const inLease = acct ? acct.remaining - acct.reserved : 0n;
    if (inLease > 0n) return;
    // A top-up refused a moment ago saw nothing free: no need to ask again.
    const r = acct?.refused;
    const empty =
      (r !== undefined && r.free <= 0n && performance.now() - r.at < this.settings.refusalMemoryMs) ||
      big((await this.store.query<{ free: unknown }>('SELECT balance - held AS free FROM accounts WHERE account = $1', [account])).rows[0]?.free) + inLease <=
        0n;
    if (empty) {
      this.metrics?.refusals.inc({ reason: 'insufficient_credits' });
      throw new InsufficientCreditsError(account, 1n);
    }
  }

  async holdChat(quote: ChatQuote): Promise<ChatCharge> {
    if (this.closing) throw new GatewayError('not_ready', 'the gateway is shutting down; retry on another replica');
    const amount = chatHold(quote.prices, quote.estimatedInputTokens, quote.maxOutputTokens);
    const limit = quote.spendLimitMicro;
    const key = limit !== undefined ? this.spend.of(quote.keyHash) : undefined;
    if (key) {
      key.lastUsed = performance.now();
      await key.loaded;
    }
    const acct = this.leases.of(quote.account);
    acct.inflight++; // keeps the lease from being handed back while this request waits
    try {
      if (key && key.stored + key.unflushed + key.reserved + amount > limit!) throw new SpendLimitError(limit!);
      // A lease whose deadline could not be pushed forward lately (the store unreachable) may be
      // released by another replica's sweeper: admit nothing more against it until it is renewed.
      if (this.leases.stale(acct)) await this.leases.renew(acct);
      while (amount > 0n && acct.remaining - acct.reserved < amount) await this.leases.topUp(acct, amount);
      // From the checks to the reservation nothing awaits: concurrent requests see each other.
      if (key && key.stored + key.unflushed + key.reserved + amount > limit!) throw new SpendLimitError(limit!);
    } catch (err) {
      acct.inflight--;
      if (err instanceof GatewayError) this.metrics?.refusals.inc({ reason: err.code });
      throw err;
    }
    acct.reserved += amount;
    acct.lastUsed = performance.now();
    this.inflight++;
    if (key) key.reserved += amount;
    this.leases.refillAhead(acct, amount);
    // Unique without a random draw per request: this replica's random id and a counter.
    const operationId = `chat:${this.opPrefix}${(++this.opCount).toString(36)}`;
    let settled: Promise<void> | undefined;
    return {
      heldMicro: amount,
      settle: (outcome) => (settled ??= this.settle(quote, amount, operationId, acct, key, outcome)),
    };
  }

  private async settle(quote: ChatQuote, amount: bigint, operationId: string, acct: AccountLease, key: KeySpend | undefined, o: ChatSettlement): Promise<void> {
    const cost = o.usage ? chatCost(quote.prices, o.usage) : 0n;
    acct.reserved -= amount;
    acct.inflight--;
    this.inflight--;
    acct.lastUsed = performance.now();
    const leaseId = acct.leaseId;
    const settles = acct.remaining < cost ? acct.remaining : cost;
    acct.remaining -= settles;
    if (key) {
      key.reserved -= amount;
      key.unflushed += cost;
    }
    const usage = o.usage ?? { inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 };
    const line = commitLine({
      operationId,
      leaseId,
      record: {
        requestId: quote.requestId,
        keyName: quote.keyName,
        keyHash: quote.keyHash,
        account: quote.account,
        group: quote.group,
        model: quote.model,
        upstreamModel: o.upstreamModel,
        protocol: quote.protocol,
        usage,
        credits: cost,
        usageSource: o.usage ? o.usageSource : 'estimated',
        status: o.status,
        httpStatus: o.httpStatus,
        latencyMs: o.latencyMs,
        ttftMs: o.ttftMs,
      },
    });
    // Not written (the journal or the store kept failing): nothing was charged, so the lease still has it.
    const undo = () => {
      if (acct.leaseId === leaseId) acct.remaining += settles;
      if (key) key.unflushed -= cost;
    };
    acct.writing++;
    let seg: JournalSegment | undefined;
    try {
      if (this.journal) seg = await this.journal.append(line, this.inflight === 0);
    } catch (err) {
      acct.writing--;
      undo();
      throw err;
    }
    const stored = this.commits
      .enqueue(line, seg, key ? quote.keyHash : undefined)
      .then(
        () => {
          if (key) {
            key.unflushed -= cost;
            key.stored += cost;
            key.writes++;
          }
        },
        (err: Error) => {
          // Journaled: the next start replays it, so it is charged, only later.
          if (seg) return;
          undo();
          throw err;
        },
      )
      .finally(() => acct.writing--);
    // With a journal the charge is durable already; the store write follows behind.
    if (!seg) return stored;
    this.metrics?.journalPending.inc();
    void stored.finally(() => this.metrics?.journalPending.dec());
  }

  /**
   * Read-your-writes on this replica: what it has answered for is in the books once this
   * resolves. Another replica's answers show within its journalFlushMs. A store that keeps failing
   * the write (its journal keeps the charges) holds a reader up for at most BOOKS_WAIT_MS.
   */
  booksCurrent(): Promise<void> {
    if (!this.journal || this.commits.idle) return Promise.resolve();
    let t: NodeJS.Timeout | undefined;
    return Promise.race([this.commits.flush(), new Promise<void>((r) => (t = setTimeout(r, BOOKS_WAIT_MS)))]).finally(() => clearTimeout(t));
  }

  /** Charges a previous process left in the journal go to the store before this one sweeps. */
  private async replayJournal(): Promise<void> {
    const j = this.local;
    if (!j || j.leftover.length === 0) return;
    const n = await j.replayLeftover((records) => this.commits.write(records, true));
    this.log.info('billing journal replayed', { segments: j.leftover.length, requests: n });
  }

  /** Flushes pending captures and hands every lease back. New requests are refused meanwhile. */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      for (const t of this.timers) clearInterval(t);
      this.commits.stopping();
      // A sweep or lease upkeep under way finishes first: it would otherwise meet a closed store.
      await Promise.all(this.running);
      await this.started;
      await this.commits.drain();
      // What the store has is deleted from the journal; what it could not take stays for the next start.
      await this.journal?.close();
      await this.leases.handBackAll();
      // Nothing left pending for the rollups' readers to add up (they would, all the same).
      await foldUsageRollups(this.store).catch((err: Error) => this.log.warn('usage rollup fold at shutdown failed', { error: err.message }));
    })());
  }

  /**
   * Runs the sweeper once now (at start and from the timer; tests call it directly). Rows of the
   * journal table older than half a lease are folded first. A live replica folds its own within
   * journalFlushMs. A dead one's lease, renewed every third of a lease, expires at least two
   * thirds of a lease after its last row, so its rows are folded no later than the sweep that
   * releases it (and a capture whose lease is gone is charged to the balance alone: the books
   * agree either way).
   */
  async sweep(): Promise<number> {
    if (this.foldTable) {
      const folded = await foldJournalTable(this.store, this.settings.leaseMs / 2);
      if (folded > 0) this.log.info('billing journal table: folded charges a replica left', { requests: folded });
      // Without the table journal, sweeps fold only until no row is left that a replica using it left behind.
      if (!(this.journal instanceof TableJournal)) this.foldTable = await journalTableHasRows(this.store);
    }
    const n = await sweepExpiredHolds(this.store);
    if (n > 0) {
      this.metrics?.swept.inc(n);
      this.log.info('released expired holds', { count: n });
    }
    return n;
  }

  /** Lease upkeep, then the spend of limited keys that nothing of this replica's is pending for. */
  private async tick(): Promise<void> {
    await this.leases.upkeep();
    await this.spend.refresh(performance.now(), 6 * this.settings.idleMs);
  }
}

/** What `tollgate serve` meters chat with. */
export function meteredBilling(
  deps: { store: Store; log: Logger; registry?: Registry; settings?: Pick<Settings, 'billing'> },
  overrides: Partial<BillingSettings> = {},
): BillingEngine {
  return new BillingEngine(deps.store, deps.log, billingSettings(deps.settings?.billing ?? {}, overrides), deps.registry);
}
