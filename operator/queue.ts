/**
 * A keyed, deduplicating work queue with per-key exponential backoff, as in client-go's
 * workqueue: a key added many times while it waits is processed once; a key added while it is
 * being processed runs once more afterwards; a failing key is retried after base * 2^n (capped).
 * New keys wait `debounceMs` so that a burst of watch events is handled in one pass.
 */
export interface QueueOptions {
  debounceMs?: number;
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  onError?: (key: string, err: unknown, retryInMs: number) => void;
}

export class WorkQueue {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly idleWaiters: (() => void)[] = [];
  private stopped = false;
  readonly debounceMs: number;
  private readonly base: number;
  private readonly max: number;

  constructor(
    private readonly handler: (key: string) => Promise<void>,
    private readonly opts: QueueOptions = {},
  ) {
    this.debounceMs = opts.debounceMs ?? 50;
    this.base = opts.baseBackoffMs ?? 50;
    this.max = opts.maxBackoffMs ?? 5000;
  }

  /** Schedules `key` (deduplicated). `delayMs` defaults to the debounce interval. */
  add(key: string, delayMs = this.debounceMs): void {
    if (this.stopped) return;
    if (this.running.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.timers.has(key)) return;
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        void this.process(key);
      }, delayMs),
    );
  }

  /** Keys waiting or running. */
  get length(): number {
    return new Set([...this.timers.keys(), ...this.running, ...this.dirty]).size;
  }

  /** Failures in a row for a key (0 after a success). */
  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  private async process(key: string): Promise<void> {
    if (this.stopped) return;
    this.running.add(key);
    try {
      await this.handler(key);
      this.failures.delete(key);
    } catch (err) {
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const wait = Math.min(this.max, this.base * 2 ** (n - 1));
      this.opts.onError?.(key, err, wait);
      this.running.delete(key);
      this.dirty.delete(key);
      this.add(key, wait);
      this.checkIdle();
      return;
    }
    this.running.delete(key);
    if (this.dirty.delete(key)) this.add(key);
    this.checkIdle();
  }

  /** Resolves once nothing waits or runs (timers included). For tests and shutdown. */
  idle(): Promise<void> {
    if (this.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private checkIdle() {
    if (this.length > 0) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  shutDown(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.dirty.clear();
    for (const w of this.idleWaiters.splice(0)) w();
  }
}
