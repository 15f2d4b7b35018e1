import type { Logger } from './log.js';

/**
 * The failures of a job that runs on a timer, logged as an outage rather than a line per tick: the
 * first failure, then one line a minute (or when the error changes) with how many failed since,
 * and one line when the job succeeds again. During a database outage the usage fold alone wrote a
 * line a second per replica, and the lease upkeep, the sweeper and the two work queues added theirs.
 */
export class FailureLog {
  private failures = 0;
  private since = 0;
  private loggedAt = 0;
  private lastError = '';

  constructor(
    private readonly log: Logger,
    /** What failed, as the lines name it ("billing usage rollup fold"). */
    private readonly what: string,
    private readonly repeatMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  failed(err: Error): void {
    const t = this.now();
    const error = err.message;
    if (this.failures++ === 0) {
      this.since = this.loggedAt = t;
      this.lastError = error;
      this.log.error(`${this.what} failed`, { error });
      return;
    }
    if (t - this.loggedAt < this.repeatMs && error === this.lastError) return;
    this.loggedAt = t;
    this.lastError = error;
    this.log.error(`${this.what} still failing`, { error, failures: this.failures, forMs: t - this.since });
  }

  succeeded(): void {
    if (this.failures === 0) return;
    this.log.info(`${this.what} recovered`, { failures: this.failures, afterMs: this.now() - this.since });
    this.failures = 0;
  }
}
