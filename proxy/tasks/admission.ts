import type { Queryable, Store } from '../store/index.js';

/** PostgreSQL's deadlock and serialization failures: the transaction is safe to run again. */
const RETRYABLE = new Set(['40P01', '40001']);
const MAX_RETRIES = 3;

interface Pending {
  write: (q: Queryable) => Promise<unknown>;
  order: string;
  resolve(v: unknown): void;
  reject(err: unknown): void;
}

/**
 * Group commit of task admissions (the task row and its credit hold). Submissions that arrive
 * while a transaction is being written go together into the next one, so a burst of accepted
 * tasks costs one commit (one WAL flush) instead of one each, and an account's balance row is
 * locked once per batch instead of once per task. Each admission only resolves once its batch
 * has committed. An admission that throws (402, a spend limit) aborts the batch and gets its own
 * error; the others are written again without it. Batches take their locks in `order` (the
 * paying account), so two replicas' batches do not lock accounts in opposite orders; a deadlock
 * with other work is retried.
 */
export class AdmissionQueue {
  private queue: Pending[] = [];
  private readonly writing = new Set<Promise<void>>();

  /**
   * `writers` transactions may be written at once (batches of different accounts proceed in
   * parallel on separate connections; batches of one account wait for its row in turn).
   */
  constructor(
    private readonly store: Store,
    private readonly writers = 4,
    private readonly maxBatch = 64,
  ) {}

  /** Runs `write` in the next group transaction; resolves with its result after the commit. */
  admit<T>(order: string, write: (q: Queryable) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ write, order, resolve: resolve, reject });
      this.kick();
    });
  }

  /** Resolves when everything queued so far has been written. */
  async drained(): Promise<void> {
    while (this.writing.size > 0) await Promise.all(this.writing);
  }

  /** Up to `writers` commits at a time; whatever queues while they write goes in the next ones. */
  private kick(): void {
    while (this.writing.size < this.writers && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch).sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
      const w: Promise<void> = this.writeBatch(batch).finally(() => {
        this.writing.delete(w);
        this.kick();
      });
      this.writing.add(w);
    }
  }

  private async writeBatch(batch: Pending[]): Promise<void> {
    let retries = 0;
    while (batch.length > 0) {
      const results: unknown[] = [];
      let failed: { index: number; err: unknown } | undefined;
      try {
        await this.store.tx(async (q) => {
          for (let i = 0; i < batch.length; i++) {
            try {
              results.push(await batch[i]!.write(q));
            } catch (err) {
              failed = { index: i, err };
              throw err;
            }
          }
        });
      } catch (err) {
        if (failed && !RETRYABLE.has((failed.err as { code?: string }).code ?? '')) {
          // This admission's own refusal: it gets its error, the rest go again without it.
          batch[failed.index]!.reject(failed.err);
          batch = batch.filter((_, i) => i !== failed!.index);
          continue;
        }
        if (RETRYABLE.has((err as { code?: string }).code ?? '') && retries++ < MAX_RETRIES) continue;
        for (const p of batch) p.reject(err);
        return;
      }
      batch.forEach((p, i) => p.resolve(results[i]));
      return;
    }
  }
}
