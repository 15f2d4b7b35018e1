import type { Backlog } from '../metrics/backlog.js';
import type { Store } from '../store/index.js';

/** The task queue and the webhook outbox, as the backlog gauges show them. Both queries use the partial indexes of unfinished rows. */
export async function readBacklog(store: Store): Promise<Backlog> {
  const tasks = await store.query<{ kind: string; status: string; n: string; age: string | null }>(
    `SELECT kind, status, count(*) AS n, EXTRACT(EPOCH FROM now() - min(created_at)) AS age
       FROM tasks WHERE status IN ('queued', 'processing') GROUP BY kind, status`,
  );
  const hooks = await store.query<{ n: string; age: string | null }>(
    `SELECT count(*) AS n, EXTRACT(EPOCH FROM now() - min(created_at)) AS age FROM webhook_deliveries WHERE status = 'pending'`,
  );
  const h = hooks.rows[0];
  return {
    tasks: tasks.rows.map((r) => ({ kind: r.kind, status: r.status, count: Number(r.n), oldestAgeSeconds: Math.max(0, Number(r.age ?? 0)) })),
    webhooks: { pending: Number(h?.n ?? 0), oldestAgeSeconds: Math.max(0, Number(h?.age ?? 0)) },
  };
}
