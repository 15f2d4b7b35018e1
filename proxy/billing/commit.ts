import type { Queryable } from '../store/index.js';
import type { ChatProtocol, Usage } from './types.js';

/** One request's usage record, as written next to its capture. */
export interface UsageRecord {
  requestId: string;
  keyName: string;
  keyHash: string;
  account: string;
  group: string;
  model: string;
  upstreamModel: string;
  protocol: ChatProtocol;
  usage: Usage;
  credits: bigint;
  usageSource: 'reported' | 'estimated';
  status: string;
  httpStatus: number;
  latencyMs: number;
  ttftMs?: number;
}

/** A settled request waiting for its group commit. */
export interface CaptureItem {
  /** Unique per request (never the client-chosen request id): the capture's and the record's operation id. */
  operationId: string;
  /** The lease the request was served from; its captures shrink it. */
  leaseId: string | undefined;
  record: UsageRecord;
}

/**
 * Writes many requests' captures and usage records in ONE statement whatever the batch size
 * (atomic on its own, so no BEGIN/COMMIT round trips; the batch goes as JSON parameters, since
 * PGlite pays per statement and per bound parameter). Its data-modifying CTEs: lock the leases
 * (FOR UPDATE, in hold id order, as every ledger writer does: hold before account), work out
 * what each capture settles of its lease (at most what the lease has left after the captures
 * before it; any excess is charged to the balance alone, since actual cost may exceed the
 * hold), insert the capture rows (a replayed operation id is skipped by the unique
 * (operation_id, kind)), apply exactly the inserted rows to accounts, leases and key spend, and
 * insert the usage records. A lease already released (swept) settles nothing and is reported
 * back as lost. Returns the operation ids applied now.
 */
export async function writeCaptures(q: Queryable, items: CaptureItem[]): Promise<{ applied: Set<string>; lostLeases: Set<string> }> {
  const applied = new Set<string>();
  const lostLeases = new Set<string>();
  if (items.length === 0) return { applied, lostLeases };
  const captures = items
    .filter((i) => i.record.credits > 0n)
    .map((i, ord) => ({
      ord,
      account: i.record.account,
      op: i.operationId,
      credits: i.record.credits.toString(),
      hold: i.leaseId ?? null,
      key_hash: i.record.keyHash,
      meta: { request: i.record.requestId, key: i.record.keyName, model: i.record.model },
    }));
  const records = items.map((i) => {
    const r = i.record;
    return {
      operation_id: i.operationId,
      request_id: r.requestId,
      key_name: r.keyName,
      key_hash: r.keyHash,
      account: r.account,
      group_name: r.group,
      model: r.model,
      upstream_model: r.upstreamModel,
      protocol: r.protocol,
      input_tokens: r.usage.inputTokens,
      cached_input_tokens: r.usage.cachedInputTokens,
      cache_write_tokens: r.usage.cacheWriteTokens,
      output_tokens: r.usage.outputTokens,
      reasoning_tokens: r.usage.reasoningTokens,
      credits: r.credits.toString(),
      usage_source: r.usageSource,
      status: r.status,
      http_status: r.httpStatus,
      latency_ms: Math.round(r.latencyMs),
      ttft_ms: r.ttftMs === undefined ? null : Math.round(r.ttftMs),
    };
  });
  const r = await q.query<{ k: string; v: string }>(
    `WITH v AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(ord INT, account TEXT, op TEXT, credits BIGINT, hold TEXT, key_hash TEXT, meta JSONB)
     ), lk AS (
       SELECT hold_id, remaining FROM holds WHERE hold_id IN (SELECT hold FROM v) ORDER BY hold_id FOR UPDATE
     ), c AS (
       SELECT v.*, CASE WHEN lk.hold_id IS NULL THEN 0 ELSE LEAST(v.credits, GREATEST(0, lk.remaining - COALESCE(SUM(v.credits)
                OVER (PARTITION BY v.hold ORDER BY v.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))) END AS settles
         FROM v LEFT JOIN lk ON lk.hold_id = v.hold
     ), ins AS (
       INSERT INTO ledger (account, operation_id, kind, delta_balance, delta_held, hold_id, meta)
       SELECT account, op, 'capture', -credits, -settles, hold, meta FROM c ORDER BY ord
       ON CONFLICT (operation_id, kind) DO NOTHING
       RETURNING account, operation_id, delta_balance, delta_held, hold_id
     ), acc AS (
       UPDATE accounts a SET balance = a.balance + s.db, held = a.held + s.dh, updated_at = now()
         FROM (SELECT account, SUM(delta_balance)::bigint AS db, SUM(delta_held)::bigint AS dh FROM ins GROUP BY account) s
        WHERE a.account = s.account
     ), lease AS (
       UPDATE holds h SET remaining = h.remaining + s.dh
         FROM (SELECT hold_id, SUM(delta_held)::bigint AS dh FROM ins WHERE hold_id IS NOT NULL GROUP BY hold_id) s
        WHERE h.hold_id = s.hold_id AND s.dh <> 0
     ), spend AS (
       INSERT INTO key_spend (key_hash, spent)
       SELECT v.key_hash, -SUM(ins.delta_balance)::bigint FROM ins JOIN v ON v.op = ins.operation_id GROUP BY v.key_hash
       ON CONFLICT (key_hash) DO UPDATE SET spent = key_spend.spent + EXCLUDED.spent, updated_at = now()
     ), rec AS (
       -- Free requests (errors before the first byte, zero usage) have no ledger row to
       -- deduplicate on: their own unique operation id does it.
       INSERT INTO usage_records (operation_id, request_id, key_name, key_hash, account, group_name, model, upstream_model, protocol,
         input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, credits, usage_source, status,
         http_status, latency_ms, ttft_ms)
       SELECT u.* FROM jsonb_to_recordset($2::jsonb) AS u(operation_id TEXT, request_id TEXT, key_name TEXT, key_hash TEXT, account TEXT,
         group_name TEXT, model TEXT, upstream_model TEXT, protocol TEXT, input_tokens BIGINT, cached_input_tokens BIGINT,
         cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, credits BIGINT, usage_source TEXT, status TEXT,
         http_status INT, latency_ms INT, ttft_ms INT)
        WHERE u.credits = 0 OR u.operation_id IN (SELECT operation_id FROM ins)
       ON CONFLICT (operation_id) DO NOTHING
       RETURNING operation_id
     )
     -- (acc, lease and spend run to completion whether read or not)
     SELECT 'applied' AS k, operation_id AS v FROM ins
     UNION SELECT 'applied', operation_id FROM rec
     UNION SELECT 'lost', hold FROM v WHERE hold IS NOT NULL AND hold NOT IN (SELECT hold_id FROM lk)`,
    [JSON.stringify(captures), JSON.stringify(records)],
  );
  for (const row of r.rows) (row.k === 'lost' ? lostLeases : applied).add(row.v);
  return { applied, lostLeases };
}
