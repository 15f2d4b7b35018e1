import type { Queryable } from '../store/index.js';
import type { BackendRef, StoredResult, TaskKind, TaskRow, TaskStatus } from './types.js';

/**
 * SQL of the tasks table. Every write a worker makes after claiming is fenced by its lease
 * (lease_owner) and by the task being unfinished, so a worker that lost its lease, or a task
 * cancelled meanwhile, changes nothing.
 */

type Row = Record<string, unknown>;
const big = (v: unknown) => (v === null || v === undefined ? null : BigInt(v as string | bigint));
const date = (v: unknown) => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(v as string));
const json = <T>(v: unknown): T => (typeof v === 'string' ? (JSON.parse(v) as T) : (v as T));

export function toTask(r: Row): TaskRow {
  return {
    id: r.id as string,
    kind: r.kind as TaskKind,
    mode: r.mode as string,
    status: r.status as TaskStatus,
    keyHash: r.key_hash as string,
    keyName: r.key_name as string,
    account: r.account as string,
    group: r.group_name as string,
    model: r.model as string,
    request: json(r.request),
    requestHash: r.request_hash as string,
    idempotencyKey: (r.idempotency_key as string | null) ?? null,
    ignored: json<string[]>(r.ignored) ?? [],
    backend: json<BackendRef | null>(r.backend) ?? null,
    upstreamId: (r.upstream_id as string | null) ?? null,
    upstreamState: json<Record<string, unknown> | null>(r.upstream_state) ?? null,
    attempts: Number(r.attempts),
    nextRunAt: date(r.next_run_at)!,
    leaseOwner: (r.lease_owner as string | null) ?? null,
    leaseUntil: date(r.lease_until),
    deadlineAt: date(r.deadline_at)!,
    holdId: r.hold_id as string,
    holdMicro: big(r.hold_micro)!,
    price: json(r.price),
    chargedMicro: big(r.charged_micro),
    results: json<StoredResult[] | null>(r.results) ?? null,
    usage: json<Record<string, number> | null>(r.usage) ?? null,
    errorCode: (r.error_code as string | null) ?? null,
    errorMessage: (r.error_message as string | null) ?? null,
    webhookUrl: (r.webhook_url as string | null) ?? null,
    webhookSecret: (r.webhook_secret as string | null) ?? null,
    createdAt: date(r.created_at)!,
    finishedAt: date(r.finished_at),
  };
}

export interface NewTask {
  id: string;
  kind: TaskKind;
  mode: string;
  status: 'queued' | 'processing';
  keyHash: string;
  keyName: string;
  account: string;
  group: string;
  model: string;
  request: object;
  requestHash: string;
  idempotencyKey?: string;
  ignored: string[];
  deadlineAt: Date;
  holdId: string;
  holdMicro: bigint;
  price: Record<string, string>;
  webhookUrl?: string;
  webhookSecret?: string;
  /** An upstream task already created at submission (videos): the worker polls it after pollInMs. */
  upstream?: { backend: BackendRef; upstreamId: string; state: Record<string, unknown> | null; pollInMs: number };
}

/** Inserts the task; false when the key already has a task under this Idempotency-Key. */
export async function insertTask(q: Queryable, t: NewTask): Promise<TaskRow | undefined> {
  const r = await q.query<Row>(
    `INSERT INTO tasks (id, kind, mode, status, key_hash, key_name, account, group_name, model, request, request_hash,
                        idempotency_key, ignored, deadline_at, hold_id, hold_micro, price, webhook_url, webhook_secret,
                        backend, upstream_id, upstream_state, attempts, next_run_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
             $20, $21, $22, $23, now() + make_interval(secs => $24))
     ON CONFLICT (key_hash, idempotency_key) DO NOTHING RETURNING *`,
    [
      t.id,
      t.kind,
      t.mode,
      t.status,
      t.keyHash,
      t.keyName,
      t.account,
      t.group,
      t.model,
      JSON.stringify(t.request),
      t.requestHash,
      t.idempotencyKey ?? null,
      JSON.stringify(t.ignored),
      t.deadlineAt.toISOString(),
      t.holdId,
      t.holdMicro.toString(),
      JSON.stringify(t.price),
      t.webhookUrl ?? null,
      t.webhookSecret ?? null,
      t.upstream ? JSON.stringify(t.upstream.backend) : null,
      t.upstream?.upstreamId ?? null,
      t.upstream?.state ? JSON.stringify(t.upstream.state) : null,
      0, // with an upstream task: no poll has failed yet
      (t.upstream?.pollInMs ?? 0) / 1000,
    ],
  );
  return r.rows[0] ? toTask(r.rows[0]) : undefined;
}

export async function getTask(q: Queryable, id: string): Promise<TaskRow | undefined> {
  const r = await q.query<Row>('SELECT * FROM tasks WHERE id = $1', [id]);
  return r.rows[0] ? toTask(r.rows[0]) : undefined;
}

export async function findByIdempotencyKey(q: Queryable, keyHash: string, idempotencyKey: string): Promise<TaskRow | undefined> {
  const r = await q.query<Row>('SELECT * FROM tasks WHERE key_hash = $1 AND idempotency_key = $2', [keyHash, idempotencyKey]);
  return r.rows[0] ? toTask(r.rows[0]) : undefined;
}

/**
 * Claims due tasks for `owner`: unfinished, due (or past their deadline), and not leased by a
 * live worker. Rows locked by another replica's claim are skipped, not waited for. A claimed
 * task shows as processing.
 */
export async function claimTasks(q: Queryable, owner: string, limit: number, leaseMs: number): Promise<TaskRow[]> {
  const r = await q.query<Row>(
    `WITH due AS (
       SELECT id FROM tasks
        WHERE status IN ('queued', 'processing')
          AND (next_run_at <= now() OR deadline_at <= now())
          AND (lease_until IS NULL OR lease_until < now())
        ORDER BY next_run_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     UPDATE tasks t SET lease_owner = $1, lease_until = now() + make_interval(secs => $3), status = 'processing', updated_at = now()
       FROM due WHERE t.id = due.id
     RETURNING t.*`,
    [owner, limit, leaseMs / 1000],
  );
  return r.rows.map(toTask);
}

/**
 * Milliseconds until the next unfinished, unleased task comes due (its next run or its deadline),
 * by the store's clock; undefined when none waits. Tasks leased by a live worker are that
 * worker's: they come back through reschedule() or the end of the lease.
 */
export async function nextTaskDueMs(q: Queryable): Promise<number | undefined> {
  const r = await q.query<{ ms: number | string | null }>(
    `SELECT EXTRACT(EPOCH FROM (MIN(LEAST(next_run_at, deadline_at)) - now())) * 1000 AS ms FROM tasks
      WHERE status IN ('queued', 'processing') AND (lease_until IS NULL OR lease_until < now())`,
  );
  const ms = r.rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Number(ms);
}

const FENCE = "id = $1 AND lease_owner = $2 AND status IN ('queued', 'processing')";

/** Extends the lease; false when it was lost (taken over, or the task was cancelled). */
export async function renewLease(q: Queryable, id: string, owner: string, leaseMs: number): Promise<boolean> {
  const r = await q.query(`UPDATE tasks SET lease_until = now() + make_interval(secs => $3) WHERE ${FENCE} RETURNING id`, [id, owner, leaseMs / 1000]);
  return r.rows.length > 0;
}

/** Gives the task back to be run again after delayMs (a poll, or a retry after a transient failure). */
export async function reschedule(
  q: Queryable,
  id: string,
  owner: string,
  p: { delayMs: number; attempts?: number; lastError?: string | null; ignored?: string[] },
): Promise<boolean> {
  const r = await q.query(
    `UPDATE tasks SET lease_owner = NULL, lease_until = NULL, next_run_at = now() + make_interval(secs => $3),
            attempts = COALESCE($4, attempts), error_message = CASE WHEN $5::boolean THEN $6 ELSE error_message END,
            ignored = COALESCE($7::jsonb, ignored), updated_at = now()
      WHERE ${FENCE} RETURNING id`,
    [id, owner, p.delayMs / 1000, p.attempts ?? null, p.lastError !== undefined, p.lastError ?? null, p.ignored ? JSON.stringify(p.ignored) : null],
  );
  return r.rows.length > 0;
}

/** Records the upstream task an asynchronous provider created, and when to poll it. */
export async function setUpstream(
  q: Queryable,
  id: string,
  owner: string,
  p: { backend: BackendRef; upstreamId: string; state: Record<string, unknown> | null; attempts: number; ignored: string[]; pollInMs: number },
): Promise<boolean> {
  const r = await q.query(
    `UPDATE tasks SET backend = $3, upstream_id = $4, upstream_state = $5, attempts = $6, ignored = $7, error_message = NULL,
            lease_owner = NULL, lease_until = NULL, next_run_at = now() + make_interval(secs => $8), updated_at = now()
      WHERE ${FENCE} RETURNING id`,
    [id, owner, JSON.stringify(p.backend), p.upstreamId, p.state ? JSON.stringify(p.state) : null, p.attempts, JSON.stringify(p.ignored), p.pollInMs / 1000],
  );
  return r.rows.length > 0;
}

export type Terminal = (
  | { status: 'succeeded'; results: StoredResult[]; usage: Record<string, number>; chargedMicro: bigint }
  | { status: 'failed' | 'cancelled'; code: string; message: string }
) & { ignored?: string[]; attempts?: number };

/**
 * Moves an unfinished task to its terminal status (in the caller's transaction), clearing the
 * lease and the webhook secret. With `owner`, only while that worker holds the lease. Returns the
 * row as it was before (with its secret), or undefined when the task had already ended.
 */
export async function markTerminal(q: Queryable, id: string, owner: string | null, t: Terminal): Promise<TaskRow | undefined> {
  const before = await q.query<Row>(
    `SELECT * FROM tasks WHERE id = $1 AND status IN ('queued', 'processing') ${owner ? 'AND lease_owner = $2' : ''} FOR UPDATE`,
    owner ? [id, owner] : [id],
  );
  if (!before.rows[0]) return undefined;
  const ok = t.status === 'succeeded';
  await q.query(
    `UPDATE tasks SET status = $2, results = $3, usage = $4, charged_micro = $5, error_code = $6, error_message = $7,
            ignored = COALESCE($8::jsonb, ignored), attempts = COALESCE($9, attempts), lease_owner = NULL, lease_until = NULL, webhook_secret = NULL,
            finished_at = now(), updated_at = now()
      WHERE id = $1`,
    [
      id,
      t.status,
      ok ? JSON.stringify(t.results) : null,
      ok ? JSON.stringify(t.usage) : null,
      ok ? t.chargedMicro.toString() : '0',
      ok ? null : t.code,
      ok ? null : t.message,
      t.ignored ? JSON.stringify(t.ignored) : null,
      t.attempts ?? null,
    ],
  );
  return toTask(before.rows[0]);
}

/** A stopping worker gives its leases back so the next claim need not wait for them to run out. */
export async function releaseLeases(q: Queryable, owner: string): Promise<number> {
  const r = await q.query(
    "UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1 AND status IN ('queued', 'processing') RETURNING id",
    [owner],
  );
  return r.rows.length;
}
