import { randomBytes } from 'node:crypto';
import type { Queryable } from '../store/index.js';

/** One webhook to deliver: the body bytes and their signature are fixed when it is enqueued. */
export interface Delivery {
  id: string;
  taskId: string;
  url: string;
  body: Buffer;
  signature: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
}

export interface AttemptRecord {
  attempt: number;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
}

export const newDeliveryId = () => `whd_${randomBytes(12).toString('hex')}`;

/** Writes a delivery in the caller's transaction (the one that ends the task). */
export async function enqueueDelivery(q: Queryable, d: { taskId: string; url: string; body: Buffer; signature: string }): Promise<string> {
  const id = newDeliveryId();
  await q.query('INSERT INTO webhook_deliveries (id, task_id, url, body, signature, status) VALUES ($1, $2, $3, $4, $5, $6)', [
    id,
    d.taskId,
    d.url,
    d.body,
    d.signature,
    'pending',
  ]);
  return id;
}

interface Row {
  id: string;
  task_id: string;
  url: string;
  body: Uint8Array;
  signature: string;
  status: Delivery['status'];
  attempts: number;
}

const toDelivery = (r: Row): Delivery => ({
  id: r.id,
  taskId: r.task_id,
  url: r.url,
  body: Buffer.from(r.body),
  signature: r.signature,
  status: r.status,
  attempts: Number(r.attempts),
});

/** Claims due pending deliveries for `owner` until the lease ends; other replicas skip them. */
export async function claimDeliveries(q: Queryable, owner: string, limit: number, leaseMs: number): Promise<Delivery[]> {
  const r = await q.query<Row>(
    `WITH due AS (
       SELECT id FROM webhook_deliveries
        WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
        ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     UPDATE webhook_deliveries d SET lease_owner = $1, lease_until = now() + make_interval(secs => $3)
       FROM due WHERE d.id = due.id
     RETURNING d.id, d.task_id, d.url, d.body, d.signature, d.status, d.attempts`,
    [owner, limit, leaseMs / 1000],
  );
  return r.rows.map(toDelivery);
}

/** Milliseconds until the next unleased pending delivery comes due, by the store's clock; undefined when none waits. */
export async function nextDeliveryDueMs(q: Queryable): Promise<number | undefined> {
  const r = await q.query<{ ms: number | string | null }>(
    `SELECT EXTRACT(EPOCH FROM (MIN(next_attempt_at) - now())) * 1000 AS ms FROM webhook_deliveries
      WHERE status = 'pending' AND (lease_until IS NULL OR lease_until < now())`,
  );
  const ms = r.rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Number(ms);
}

/** What an attempt that began and never ended says: the process stopped or died during it. */
export const NO_OUTCOME = 'no outcome recorded: the gateway stopped during the attempt';

/**
 * Records that attempt `attempt` is about to be sent (fenced by the lease), before it is: if the
 * process dies during it, the attempt stays visible with no outcome, and the next one gets the
 * next number. Returns false when the lease was lost (send nothing then).
 */
export async function beginAttempt(
  store: { tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> },
  d: Delivery,
  owner: string,
  attempt: number,
  startedAt: Date,
): Promise<boolean> {
  return store.tx(async (q) => {
    const u = await q.query("UPDATE webhook_deliveries SET attempts = $3 WHERE id = $1 AND lease_owner = $2 AND status = 'pending' RETURNING id", [
      d.id,
      owner,
      attempt,
    ]);
    if (u.rows.length === 0) return false;
    await q.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status_code, error) VALUES ($1, $2, $3, NULL, NULL, $4)
       ON CONFLICT (delivery_id, attempt) DO NOTHING`,
      [d.id, attempt, startedAt.toISOString(), NO_OUTCOME],
    );
    return true;
  });
}

/**
 * Records one attempt and its consequence (delivered, retry at `retryInMs`, or failed for good),
 * fenced by the lease: a worker that lost its lease records nothing. Returns false then.
 */
export async function recordAttempt(
  store: { tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> },
  d: Delivery,
  owner: string,
  a: AttemptRecord,
  next: { outcome: 'delivered' } | { outcome: 'retry'; inMs: number } | { outcome: 'failed' },
): Promise<boolean> {
  return store.tx(async (q) => {
    const status = next.outcome === 'retry' ? 'pending' : next.outcome;
    const u = await q.query(
      `UPDATE webhook_deliveries
          SET attempts = $3, status = $4, last_error = $5, lease_owner = NULL, lease_until = NULL,
              next_attempt_at = now() + make_interval(secs => $6),
              finished_at = CASE WHEN $4 = 'pending' THEN NULL ELSE now() END
        WHERE id = $1 AND lease_owner = $2 AND status = 'pending'
        RETURNING id`,
      [
        d.id,
        owner,
        a.attempt,
        status,
        a.error ?? (a.statusCode !== null && next.outcome !== 'delivered' ? `HTTP ${a.statusCode}` : null),
        next.outcome === 'retry' ? next.inMs / 1000 : 0,
      ],
    );
    if (u.rows.length === 0) return false;
    // Begun by beginAttempt; inserted here if it was not (an attempt refused before it was sent).
    await q.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status_code, error) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (delivery_id, attempt) DO UPDATE SET duration_ms = EXCLUDED.duration_ms, status_code = EXCLUDED.status_code, error = EXCLUDED.error`,
      [d.id, a.attempt, a.startedAt.toISOString(), Math.round(a.durationMs), a.statusCode, a.error],
    );
    return true;
  });
}

/** Gives back the leases of a stopping worker, so the next claim need not wait for them to run out. */
export async function releaseDeliveryLeases(q: Queryable, owner: string): Promise<void> {
  await q.query("UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1 AND status = 'pending'", [owner]);
}

export interface DeliveryView {
  id: string;
  url: string;
  status: Delivery['status'];
  /** durationMs null: the attempt began and no outcome was recorded (the gateway stopped during it). */
  attempts: (Omit<AttemptRecord, 'durationMs'> & { durationMs: number | null })[];
  nextAttemptAt: string | null;
}

/** A task's deliveries with every attempt (admin view). The URL's query string is left out: it may carry a token. */
export async function deliveriesOf(q: Queryable, taskId: string): Promise<DeliveryView[]> {
  const ds = await q.query<{ id: string; url: string; status: Delivery['status']; next_attempt_at: Date | string }>(
    'SELECT id, url, status, next_attempt_at FROM webhook_deliveries WHERE task_id = $1 ORDER BY created_at',
    [taskId],
  );
  const out: DeliveryView[] = [];
  for (const d of ds.rows) {
    const as = await q.query<{ attempt: number; started_at: Date | string; duration_ms: number | null; status_code: number | null; error: string | null }>(
      'SELECT attempt, started_at, duration_ms, status_code, error FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt',
      [d.id],
    );
    const u = new URL(d.url);
    out.push({
      id: d.id,
      url: `${u.origin}${u.pathname}`,
      status: d.status,
      nextAttemptAt: d.status === 'pending' ? new Date(d.next_attempt_at).toISOString() : null,
      attempts: as.rows.map((a) => ({
        attempt: Number(a.attempt),
        startedAt: new Date(a.started_at),
        durationMs: a.duration_ms === null ? null : Number(a.duration_ms),
        statusCode: a.status_code === null ? null : Number(a.status_code),
        error: a.error,
      })),
    });
  }
  return out;
}
