import { FailureLog } from '../../kernel/failure-log.js';
import type { Logger } from '../../kernel/log.js';

export interface LoopOptions<T> {
  name: string;
  /** How soon to look again after a claim that found work (more may be coming due). */
  intervalMs: number;
  /** Items worked on at once by this replica. */
  capacity: number;
  log: Logger;
  /** Claims up to n due items (leased to this replica). */
  claim(n: number): Promise<T[]>;
  /**
   * Milliseconds until the next unleased item comes due, by the store's clock (at most 0 when one
   * already is; undefined when none waits): an idle loop sleeps until then instead of polling.
   */
  nextDueMs(): Promise<number | undefined>;
  /** Works one item; the signal aborts at stop() once the grace period is over. */
  run(item: T, signal: AbortSignal): Promise<void>;
}

/**
 * A background loop over a claimable table (tasks, webhook deliveries): claim what is due up to
 * the free capacity, run each claim concurrently, look again after an interval or when woken.
 * When a claim finds nothing, the loop asks the store when the next item comes due and sleeps
 * until then (at most IDLE_INTERVALS intervals): an idle gateway does not query its store twice a second, and
 * a poll or retry scheduled for later is still claimed when it is due. Work submitted on this
 * replica wakes it at once. Shared by the task worker and the delivery worker.
 */
export class WorkerLoop<T> {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopped = true;
  private ticking: Promise<void> | undefined;
  private again = false;
  /** How long to sleep after the current tick, unless something wakes the loop first. */
  private sleepMs: number;
  private readonly inflight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  /** A claim fails every interval while the store is down: logged as one outage. */
  private readonly claimFailures: FailureLog;

  constructor(private readonly opts: LoopOptions<T>) {
    this.claimFailures = new FailureLog(opts.log, `${opts.name}: claim`);
    this.sleepMs = opts.intervalMs;
  }

  start(): void {
    this.stopped = false;
    this.wake();
  }

  /** Looks for due work now (after a submission, or when an item finished and capacity freed). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = true;
    this.ticking = this.tick().finally(() => {
      this.running = false;
      if (this.stopped) return;
      if (this.again) {
        this.again = false;
        this.wake();
      } else this.timer = setTimeout(() => this.wake(), this.sleepMs);
    });
  }

  private async tick(): Promise<void> {
    this.sleepMs = this.opts.intervalMs;
    const free = this.opts.capacity - this.inflight.size;
    if (free <= 0) return;
    let items: T[];
    try {
      items = await this.opts.claim(free);
      if (items.length === 0) this.sleepMs = idleSleep(await this.opts.nextDueMs(), this.opts.intervalMs);
      this.claimFailures.succeeded();
    } catch (err) {
      this.claimFailures.failed(err as Error);
      return;
    }
    for (const item of items) {
      const p: Promise<void> = this.opts
        .run(item, this.abort.signal)
        .catch((err: Error) => this.opts.log.error(`${this.opts.name}: work failed`, { error: err.stack ?? err.message }))
        .finally(() => {
          this.inflight.delete(p);
          this.wake();
        });
      this.inflight.add(p);
    }
    // A full claim means more may be due right away.
    if (items.length === free && free > 0) this.again = true;
  }

  /** Stops claiming, lets work in flight finish for up to graceMs, then aborts it and waits. */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    if (this.inflight.size > 0 && graceMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled([...this.inflight]), new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
    }
    this.abort.abort();
    await Promise.allSettled([...this.inflight]);
  }
}

/**
 * The longest sleep after a claim that found nothing, in intervals: it bounds how late the loop
 * sees work the store cannot announce (another replica's lease running out, a task submitted on
 * a replica whose worker was full).
 */
const IDLE_INTERVALS = 8;

/**
 * The sleep after a claim that found nothing: until the next item is due, at most IDLE_INTERVALS
 * intervals. An item due already (skipped while another replica's claim held its row) is looked
 * for again after the usual interval, not at once.
 */
function idleSleep(dueMs: number | undefined, intervalMs: number): number {
  const most = IDLE_INTERVALS * intervalMs;
  if (dueMs === undefined) return most;
  if (dueMs <= 0) return intervalMs;
  return Math.min(Math.ceil(dueMs), most);
}
