import { Gauge, type Registry } from 'prom-client';

/** Unfinished tasks of one kind and status, and how long the oldest has waited since submission. */
export interface TaskBacklog {
  kind: string;
  status: string;
  count: number;
  oldestAgeSeconds: number;
}

/** The kinds and unfinished statuses always reported (0 when empty), so a dashboard shows a line, not "no data". */
const KINDS = ['image', 'video'];
const OPEN = ['queued', 'processing'];

export interface Backlog {
  tasks: TaskBacklog[];
  webhooks: { pending: number; oldestAgeSeconds: number };
}

/**
 * Queue gauges read from the store at each scrape (one query per scrape, shared by the gauges).
 * They describe the shared store, so every replica reports the same values: aggregate with max().
 * A scrape while the store is unreachable leaves them out rather than failing the scrape.
 */
export function backlogGauges(registry: Registry, read: () => Promise<Backlog>): void {
  let pending: Promise<Backlog | undefined> | undefined;
  // The four gauges are collected one after another in one scrape: they share one read.
  const current = () =>
    (pending ??= read()
      .catch(() => undefined)
      .finally(() => setImmediate(() => (pending = undefined))));
  const registers = [registry];
  // Every kind and open status is present (0 when none), so a queue that empties reads 0, not absent.
  const taskGauge = (name: string, help: string, value: (t: { count: number; oldestAgeSeconds: number }) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['kind', 'status'] as const,
      registers,
      async collect() {
        const b = await current();
        this.reset();
        if (!b) return;
        for (const kind of KINDS) for (const status of OPEN) this.set({ kind, status }, 0);
        for (const t of b.tasks) this.set({ kind: t.kind, status: t.status }, value(t));
      },
    });
  taskGauge('tollgate_tasks_open', 'Unfinished tasks in the store, by kind and status (queued, processing)', (t) => t.count);
  taskGauge('tollgate_tasks_oldest_age_seconds', 'Age of the oldest unfinished task, by kind and status (0 when none)', (t) => t.oldestAgeSeconds);
  new Gauge({
    name: 'tollgate_webhook_backlog',
    help: 'Webhook deliveries pending in the outbox (not yet delivered, not given up)',
    registers,
    async collect() {
      const b = await current();
      this.reset();
      if (b) this.set(b.webhooks.pending);
    },
  });
  new Gauge({
    name: 'tollgate_webhook_oldest_pending_age_seconds',
    help: 'Age of the oldest pending webhook delivery (0 when none is pending)',
    registers,
    async collect() {
      const b = await current();
      this.reset();
      if (b) this.set(b.webhooks.oldestAgeSeconds);
    },
  });
}
