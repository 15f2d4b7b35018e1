import { FailureLog } from '../../kernel/failure-log.js';
import type { Logger } from '../../kernel/log.js';

export interface LoopOptions<T> {
  name: string;
  /** How often to look for due work when nothing wakes the loop. */
  intervalMs: number;
  /** Items worked on at once by this replica. */
  capacity: number;
  log: Logger;
  /** Claims up to n due items (leased to this replica). */
  claim(n: number): Promise<T[]>;
  /** Works one item; the signal aborts at stop() once the grace period is over. */
  run(item: T, signal: AbortSignal): Promise<void>;
}

/**
 * A background loop over a claimable table (tasks, webhook deliveries): claim what is due up to
 * the free capacity, run each claim concurrently, look again after an interval or when woken.
 * Shared by the task worker and the delivery worker.
 */
export class WorkerLoop<T> {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopped = true;
  private ticking: Promise<void> | undefined;
  private again = false;
  private readonly inflight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  /** A claim fails every interval while the store is down: logged as one outage. */
  private readonly claimFailures: FailureLog;

  constructor(private readonly opts: LoopOptions<T>) {
    this.claimFailures = new FailureLog(opts.log, `${opts.name}: claim`);
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
      } else this.timer = setTimeout(() => this.wake(), this.opts.intervalMs);
    });
  }

  private async tick(): Promise<void> {
    const free = this.opts.capacity - this.inflight.size;
    if (free <= 0) return;
    let items: T[];
    try {
      items = await this.opts.claim(free);
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
