import { fromMicro } from '../../api/snapshot/money.js';
import { badRequest } from '../../kernel/errors.js';
import type { Queryable } from '../store/index.js';

/**
 * Usage over time, read from the hourly and daily rollups (migrations 020, 021, 031) kept beside
 * the usage records: an answer reads (buckets x models) rows per key, never the records themselves.
 */
export type Bucket = 'hour' | 'day';
export type SummaryGroup = 'model' | 'key' | 'account' | 'none';

export interface SummaryQuery {
  bucket: Bucket;
  groupBy: SummaryGroup;
  since: Date;
  until: Date;
  account?: string;
  keyName?: string;
  keyHash?: string;
  model?: string;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Widest range per bucket: a chart of at most ~800 points per series. */
const MAX_RANGE: Record<Bucket, number> = { hour: 31 * DAY, day: 731 * DAY };
const DEFAULT_RANGE: Record<Bucket, number> = { hour: DAY, day: 30 * DAY };

function time(v: string, param: string): Date {
  const d = /^\d+$/.test(v) ? new Date(Number(v) * 1000) : new Date(v);
  if (Number.isNaN(d.getTime()) || !/^\d+$|^\d{4}-\d{2}-\d{2}/.test(v))
    throw badRequest(`${param} must be an RFC 3339 time or epoch seconds, got "${v.slice(0, 50)}"`, param);
  return d;
}

/** ?bucket=hour|day&group_by=model|key|account|none&since=&until=&account=&key=&model= (400 on a bad value). */
export function parseSummaryQuery(q: URLSearchParams, allowed: readonly SummaryGroup[], now = Date.now()): SummaryQuery {
  const s = (n: string) => {
    const v = q.get(n);
    return v === null || v === '' ? undefined : v;
  };
  const bucket = s('bucket') ?? 'hour';
  if (bucket !== 'hour' && bucket !== 'day') throw badRequest('bucket must be "hour" or "day"', 'bucket');
  const groupBy = s('group_by') ?? 'model';
  if (!(allowed as readonly string[]).includes(groupBy)) throw badRequest(`group_by must be one of ${allowed.join(', ')}`, 'group_by');
  const untilRaw = s('until');
  const until = untilRaw ? time(untilRaw, 'until') : new Date(now);
  const sinceRaw = s('since');
  const since = sinceRaw ? time(sinceRaw, 'since') : new Date(until.getTime() - DEFAULT_RANGE[bucket]);
  if (since >= until) throw badRequest('since must be before until', 'since');
  if (until.getTime() - since.getTime() > MAX_RANGE[bucket])
    throw badRequest(`the range is at most ${MAX_RANGE[bucket] / DAY} days with bucket=${bucket}; use bucket=day or a shorter range`, 'since');
  const out: SummaryQuery = { bucket, groupBy: groupBy as SummaryGroup, since, until };
  const account = s('account');
  const key = s('key');
  const model = s('model');
  if (account) out.account = account;
  if (key) out.keyName = key;
  if (model) out.model = model;
  return out;
}

const GROUP_COLUMN: Record<SummaryGroup, string> = { model: 'model', key: 'key_name', account: 'account', none: "''" };

interface Row {
  start: Date | string;
  grp: string;
  requests: string | number;
  errors: string | number;
  input_tokens: string | number;
  cached_input_tokens: string | number;
  output_tokens: string | number;
  credits: string | bigint;
}

/**
 * Buckets (UTC hours or days; `since` is rounded down to its bucket) with requests, tokens and
 * credits per group, and the totals of the range.
 */
export async function usageSummary(q: Queryable, f: SummaryQuery) {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, v: unknown) => {
    params.push(v);
    where.push(sql.replace('?', `$${params.length}`));
  };
  if (f.keyHash) add('key_hash = ?', f.keyHash);
  if (f.account) add('account = ?', f.account);
  if (f.keyName) add('key_name = ?', f.keyName);
  if (f.model) add('model = ?', f.model);
  // Days from the daily rollup, hours from the hourly one: each bucket is one row per key and model.
  // Plus the rows the trigger appended since the last fold (migration 031), read in the same
  // statement: a fold moves rows from one to the other in one transaction, so none is missed or
  // counted twice.
  const [table, column] = f.bucket === 'day' ? ['usage_daily', 'day'] : ['usage_hourly', 'hour'];
  const pendingColumn = f.bucket === 'day' ? "date_trunc('day', hour, 'UTC')" : 'hour';
  params.push(f.since.toISOString(), f.until.toISOString());
  const range = (col: string) =>
    [...where, `${col} >= date_trunc('${f.bucket}', $${params.length - 1}::timestamptz, 'UTC')`, `${col} < $${params.length}`].join(' AND ');
  const sums = 'requests, errors, input_tokens, cached_input_tokens, output_tokens, credits';
  const r = await q.query<Row>(
    `SELECT start, grp, sum(requests) AS requests, sum(errors) AS errors, sum(input_tokens) AS input_tokens,
            sum(cached_input_tokens) AS cached_input_tokens, sum(output_tokens) AS output_tokens, sum(credits) AS credits
       FROM (SELECT ${column} AS start, ${GROUP_COLUMN[f.groupBy]} AS grp, ${sums} FROM ${table} WHERE ${range(column)}
             UNION ALL
             SELECT ${pendingColumn}, ${GROUP_COLUMN[f.groupBy]}, ${sums} FROM usage_rollup_pending WHERE ${range(pendingColumn)}) u
      GROUP BY 1, 2 ORDER BY 1, 2`,
    params,
  );
  const totals = { requests: 0, errors: 0, input_tokens: 0, cached_input_tokens: 0, output_tokens: 0, credits: 0n };
  const data = r.rows.map((row) => {
    const credits = BigInt(row.credits);
    const v = {
      start: new Date(row.start).toISOString(),
      ...(f.groupBy === 'none' ? {} : { [f.groupBy]: row.grp }),
      requests: Number(row.requests),
      errors: Number(row.errors),
      input_tokens: Number(row.input_tokens),
      cached_input_tokens: Number(row.cached_input_tokens),
      output_tokens: Number(row.output_tokens),
      credits: fromMicro(credits),
    };
    totals.requests += v.requests;
    totals.errors += v.errors;
    totals.input_tokens += v.input_tokens;
    totals.cached_input_tokens += v.cached_input_tokens;
    totals.output_tokens += v.output_tokens;
    totals.credits += credits;
    return v;
  });
  return {
    bucket: f.bucket,
    group_by: f.groupBy,
    since: f.since.toISOString(),
    until: f.until.toISOString(),
    data,
    totals: { ...totals, credits: fromMicro(totals.credits) },
  };
}
