import type { Logger } from '../../kernel/log.js';
import type { Store } from '../store/index.js';
import { writeCommitLines } from './commit.js';
import type { ChargeJournal, JournalSegment } from './journal.js';
import type { BillingMetrics } from './metrics.js';
import type { BillingSettings } from './settings.js';

interface Queued {
  /** The capture as billing_commit() takes it, serialized once (it is also the journal's line). */
  line: string;
  /** The journal segment that already holds it durably, if the engine has a journal. */
  seg: JournalSegment | undefined;
  /** The key's hash when the key has a spend limit: its spend is re-read after the commit. */
  limitedKey: string | undefined;
  resolve(): void;
  reject(err: Error): void;
}

/**
 * Settled requests' captures, written in group commits: one transaction for every capture and
 * usage record that queued while the previous one ran. enqueue() resolves once its capture is
 * in the store.
 */
export class GroupCommit {
  private queue: Queued[] = [];
  /**
   * The group commit being gathered or written: one at a time on either store. On PostgreSQL a
   * second one used to overlap it (sending its batch, then waiting for the lease's and the
   * account's row locks): it split the queue into smaller batches and made each wait for the
   * other's commit, and served fewer requests (bench/RESULTS.md, "2026-11-28, later again").
   */
  private writer: Promise<void> | undefined;
  /** Ends the linger of the commit waiting to gather more (shutdown, or a full batch). */
  private endLinger: (() => void) | undefined;
  private closing = false;
  /** Captures ever queued, and ever written or failed: batches leave the queue in order, one commit at a time. */
  private queued = 0;
  private finished = 0;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly settings: BillingSettings,
    private readonly journal: ChargeJournal | undefined,
    private readonly metrics: BillingMetrics | undefined,
    /** Chat requests holding credits (admitted, not yet settled): a commit lingers while more are coming. */
    private readonly inflight: () => number,
    /**
     * Runs after each commit that landed, its requests settled, before the next commit can start;
     * told the limited keys the commit charged.
     */
    private readonly afterCommit?: (limitedKeys: ReadonlySet<string>) => Promise<void>,
  ) {}

  /** Nothing queued and nothing being written. */
  get idle(): boolean {
    return this.writer === undefined && this.queue.length === 0;
  }

  enqueue(line: string, seg: JournalSegment | undefined, limitedKey?: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ line, seg, limitedKey, resolve, reject });
      this.queued++;
      if (this.queue.length >= this.settings.maxBatch) this.endLinger?.();
      this.kick();
    });
  }

  /** Shutdown has begun: commits stop lingering, and journaled records stop being retried forever. */
  stopping(): void {
    this.closing = true;
  }

  /** Writes everything queued now, without lingering (shutdown). */
  async drain(): Promise<void> {
    this.stopping();
    this.endLinger?.();
    while (this.writer || this.queue.length) {
      this.kick();
      await this.writer;
    }
  }

  /**
   * Resolves once every capture queued before the call is in the store (or has failed), ending a
   * linger to get there: behind a journal, a reader of the books on this replica then sees every
   * charge this replica has answered for.
   */
  async flush(): Promise<void> {
    const upTo = this.queued;
    while (this.finished < upTo) {
      this.endLinger?.();
      this.kick();
      await this.writer;
    }
  }

  /**
   * Whatever queues while a commit is written goes in the next one, so batches grow by themselves
   * with the load and with the store's commit time. A commit starts only after the event loop
   * has run its pending I/O once (setImmediate): every request whose answer is already in joins
   * it. When more requests are in flight than waiting, it lingers commitLingerMs more (0 by
   * default; a linger makes fewer, larger commits, each answer that much later). A lone request
   * is not delayed.
   */
  private kick(): void {
    if (this.writer || this.queue.length === 0) return;
    // More requests in flight than waiting: some will settle in a moment; let them share the commit.
    // Behind a journal nobody waits for the store, so commits gather for longer.
    let linger = 0;
    if (this.journal) {
      if (!this.closing && this.queue.length < this.settings.maxBatch) linger = this.settings.journalFlushMs;
    } else if (this.inflight() > this.queue.length) linger = this.settings.commitLingerMs;
    // Nobody else holds credits: nothing can join this commit, so it need not wait a turn.
    const alone = linger === 0 && this.inflight() === 0;
    const w: Promise<void> = new Promise<void>((r) => {
      if (alone) return r();
      if (linger === 0) return void setImmediate(r);
      const wake = () => {
        clearTimeout(t);
        this.endLinger = undefined;
        r();
      };
      const t = setTimeout(wake, linger);
      this.endLinger = wake;
    })
      .then(() => this.commitNext())
      .finally(() => {
        this.writer = undefined;
        this.kick();
      });
    this.writer = w;
  }

  private async commitNext(): Promise<void> {
    const batch = this.queue.splice(0, this.settings.maxBatch);
    if (batch.length === 0) return;
    try {
      await this.write(
        batch.map((b) => b.line),
        batch.every((b) => b.seg),
      );
      for (const b of batch) b.resolve();
      if (this.journal) {
        const per = new Map<JournalSegment, number>();
        for (const b of batch) if (b.seg) per.set(b.seg, (per.get(b.seg) ?? 0) + 1);
        for (const [seg, n] of per) this.journal.committed(seg, n);
      }
    } catch (err) {
      this.log.error('billing group commit failed', { captures: batch.length, error: (err as Error).message });
      for (const b of batch) b.reject(err as Error);
      return;
    } finally {
      this.finished += batch.length;
    }
    const limitedKeys = new Set<string>();
    for (const b of batch) if (b.limitedKey !== undefined) limitedKeys.add(b.limitedKey);
    await this.afterCommit?.(limitedKeys).catch((err: Error) => this.log.warn('billing: reading back after a group commit failed', { error: err.message }));
  }

  /**
   * A failed commit is retried with the same operation ids, so a commit that did land is not
   * applied twice. Records a journal holds are retried until the store takes them (short of
   * shutdown: then they stay in the journal); the others fail their requests after four tries.
   */
  async write(records: string[], journaled: boolean): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const end = this.metrics?.commits.startTimer();
        const { lostLeases } = await writeCommitLines(this.store, records);
        end?.();
        this.metrics?.captures.inc(records.length);
        if (lostLeases.size) this.log.warn('captures written after their lease was released', { leases: lostLeases.size });
        return;
      } catch (err) {
        if (attempt >= 3 && !(journaled && !this.closing)) throw err;
        if (attempt === 3)
          this.log.error('billing store write failing; the journal keeps the charges meanwhile', { captures: records.length, error: (err as Error).message });
        await new Promise((r) => setTimeout(r, Math.min(5000, 50 * 4 ** attempt)));
      }
    }
  }
}
