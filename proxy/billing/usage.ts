import { fromMicro } from '../../api/snapshot/money.js';
import { badRequest } from '../../kernel/errors.js';
import type { Queryable } from '../store/index.js';

/** Filters of a usage listing, parsed from a query string. */
export interface UsageQuery {
  account?: string;
  keyName?: string;
  keyHash?: string;
  model?: string;
  /** chat, image or video. */
  kind?: string;
  since?: Date;
  until?: Date;
  limit: number;
  /** Records older than this id (newest first). */
  before?: bigint;
}

export const MAX_USAGE_LIMIT = 1000;

/** RFC 3339 or epoch seconds. */
function time(v: string, param: string): Date {
  const d = /^\d+$/.test(v) ? new Date(Number(v) * 1000) : new Date(v);
  if (Number.isNaN(d.getTime()) || !/^\d+$|^\d{4}-\d{2}-\d{2}/.test(v))
    throw badRequest(`${param} must be an RFC 3339 time or epoch seconds, got "${v.slice(0, 50)}"`, param);
  return d;
}

const KINDS = ['chat', 'image', 'video'];

/** Parses ?account=&key=&model=&kind=&since=&until=&limit=&cursor= (400 on a bad value). */
export function parseUsageQuery(q: URLSearchParams): UsageQuery {
  const out: UsageQuery = { limit: 100 };
  const s = (n: string) => {
    const v = q.get(n);
    return v === null || v === '' ? undefined : v;
  };
  const account = s('account');
  const key = s('key');
  const model = s('model');
  if (account) out.account = account;
  if (key) out.keyName = key;
  if (model) out.model = model;
  const kind = s('kind');
  if (kind !== undefined) {
    if (!KINDS.includes(kind)) throw badRequest(`kind must be one of ${KINDS.join(', ')}`, 'kind');
    out.kind = kind;
  }
  const since = s('since');
  const until = s('until');
  if (since) out.since = time(since, 'since');
  if (until) out.until = time(until, 'until');
  const limit = s('limit');
  if (limit !== undefined) {
    const n = Number(limit);
    if (!Number.isInteger(n) || n < 1 || n > MAX_USAGE_LIMIT) throw badRequest(`limit must be an integer from 1 to ${MAX_USAGE_LIMIT}`, 'limit');
    out.limit = n;
  }
  const cursor = s('cursor');
  if (cursor !== undefined) {
    const raw = Buffer.from(cursor, 'base64url').toString('utf8');
    if (!/^u\d{1,19}$/.test(raw)) throw badRequest('cursor is not one this API returned', 'cursor');
    out.before = BigInt(raw.slice(1));
  }
  return out;
}

const num = (v: unknown) => Number(v);

/** Usage records, newest first, and the cursor of the next page (null on the last). */
export async function listUsage(q: Queryable, f: UsageQuery): Promise<{ data: Record<string, unknown>[]; next_cursor: string | null }> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, v: unknown) => {
    params.push(v);
    where.push(sql.replace('?', `$${params.length}`));
  };
  if (f.account) add('account = ?', f.account);
  if (f.keyName) add('key_name = ?', f.keyName);
  if (f.keyHash) add('key_hash = ?', f.keyHash);
  if (f.model) add('model = ?', f.model);
  if (f.kind) add('kind = ?', f.kind);
  if (f.since) add('created_at >= ?', f.since.toISOString());
  if (f.until) add('created_at < ?', f.until.toISOString());
  if (f.before !== undefined) add('id < ?', f.before.toString());
  params.push(f.limit + 1);
  const r = await q.query<Record<string, unknown>>(
    `SELECT * FROM usage_records ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.length}`,
    params,
  );
  const rows = r.rows.slice(0, f.limit);
  const more = r.rows.length > f.limit;
  const last = rows.at(-1);
  return {
    data: rows.map(view),
    next_cursor: more && last ? Buffer.from(`u${String(last.id)}`).toString('base64url') : null,
  };
}

/** A usage record as the APIs show it: credits as a decimal string, the key by its name only. */
export function view(r: Record<string, unknown>): Record<string, unknown> {
  return {
    id: String(r.id),
    request_id: r.request_id,
    created_at: new Date(r.created_at as string | Date).toISOString(),
    key: r.key_name,
    account: r.account,
    group: r.group_name,
    model: r.model,
    upstream_model: r.upstream_model,
    protocol: r.protocol,
    input_tokens: num(r.input_tokens),
    cached_input_tokens: num(r.cached_input_tokens),
    cache_write_tokens: num(r.cache_write_tokens),
    output_tokens: num(r.output_tokens),
    reasoning_tokens: num(r.reasoning_tokens),
    credits: fromMicro(BigInt(r.credits as string | bigint)),
    usage: r.usage_source,
    status: r.status,
    http_status: num(r.http_status),
    latency_ms: num(r.latency_ms),
    ttft_ms: r.ttft_ms === null || r.ttft_ms === undefined ? null : num(r.ttft_ms),
    kind: r.kind ?? 'chat',
    task_id: r.task_id ?? null,
    images: r.images === null || r.images === undefined ? null : num(r.images),
    seconds: r.seconds === null || r.seconds === undefined ? null : num(r.seconds),
    refunded_credits: fromMicro(BigInt((r.refunded_credits as string | bigint | undefined) ?? 0)),
  };
}

/** What an image or video task's usage record says when the task ends. */
export interface TaskUsage {
  taskId: string;
  kind: 'image' | 'video';
  keyName: string;
  keyHash: string;
  account: string;
  group: string;
  model: string;
  /** The upstream model that ran it; empty when none was reached. */
  upstreamModel: string;
  status: 'succeeded' | 'failed' | 'cancelled';
  /** Micro-credits captured (0 for a failed or cancelled task). */
  credits: bigint;
  /** Micro-credits of the hold given back by a refund (failure, cancel). */
  refunded: bigint;
  /** Images charged (image tasks) or seconds charged (video tasks): 0 when refunded. */
  images?: number;
  seconds?: number;
  createdAt: Date;
}

/**
 * The usage record of a task's charge or refund, written in the transaction that ends the task
 * (so it exists exactly when the money moved). Its operation id is the task's hold id: a replay
 * writes nothing.
 */
export async function recordTaskUsage(q: Queryable, u: TaskUsage): Promise<void> {
  await q.query(
    `INSERT INTO usage_records (operation_id, request_id, key_name, key_hash, account, group_name, model, upstream_model, protocol,
                                input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, credits,
                                usage_source, status, http_status, latency_ms, kind, task_id, images, seconds, refunded_credits)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, 0, 0, 0, 0, $10, 'reported', $11, 200, $12, $13, $2, $14, $15, $16)
     ON CONFLICT (operation_id) DO NOTHING`,
    [
      `task:${u.taskId}`,
      u.taskId,
      u.keyName,
      u.keyHash,
      u.account,
      u.group,
      u.model,
      u.upstreamModel,
      u.kind === 'image' ? 'images' : 'videos',
      u.credits.toString(),
      u.status,
      Math.min(2_147_483_647, Math.max(0, Date.now() - u.createdAt.getTime())),
      u.kind,
      u.images ?? null,
      u.seconds ?? null,
      u.refunded.toString(),
    ],
  );
}

/**
 * Moves the rows the usage trigger appended to usage_rollup_pending into usage_hourly and
 * usage_daily (migration 031), in one transaction; every replica calls it every second or so, and
 * a call while another replica folds returns at once. Returns how many pending rows it moved.
 */
export async function foldUsageRollups(q: Queryable): Promise<number> {
  const r = await q.query<{ moved: number }>('SELECT usage_rollup_fold() AS moved');
  return Number(r.rows[0]?.moved ?? 0);
}
