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

const big = (v: unknown): bigint => (v === null || v === undefined ? 0n : BigInt(v as string | number | bigint));

/**
 * Writes many requests' captures and usage records in the caller's transaction in two
 * statements whatever the batch size (PGlite pays per statement and per bound parameter, so the
 * batch goes as one JSON parameter): lock the leases, then one statement of data-modifying CTEs
 * that inserts the capture rows (a replayed operation id is skipped by the unique
 * (operation_id, kind)), applies exactly the inserted rows to accounts, leases and key spend,
 * and inserts the usage records. A capture settles against its lease at most what the lease
 * has left; any excess is charged to the balance alone (actual cost may exceed the hold). A
 * lease already released (swept) settles nothing and is reported back as lost. Returns the
 * operation ids that were applied now.
 */
export async function writeCaptures(q: Queryable, items: CaptureItem[]): Promise<{ applied: Set<string>; lostLeases: Set<string> }> {
  const applied = new Set<string>();
  const lostLeases = new Set<string>();
  if (items.length === 0) return { applied, lostLeases };

  const leaseIds = [...new Set(items.map((i) => i.leaseId).filter((x): x is string => x !== undefined))].sort();
  const remaining = new Map<string, bigint>();
  if (leaseIds.length) {
    const r = await q.query<{ hold_id: string; remaining: unknown }>(
      `SELECT hold_id, remaining FROM holds WHERE hold_id IN (${leaseIds.map((_, i) => `$${i + 1}`).join(', ')}) ORDER BY hold_id FOR UPDATE`,
      leaseIds,
    );
    for (const row of r.rows) remaining.set(row.hold_id, big(row.remaining));
    for (const id of leaseIds) if (!remaining.has(id)) lostLeases.add(id);
  }

  const captures = items
    .filter((i) => i.record.credits > 0n)
    .map((i) => {
      const open = i.leaseId !== undefined ? remaining.get(i.leaseId) : undefined;
      const settles = open === undefined ? 0n : open < i.record.credits ? open : i.record.credits;
      if (open !== undefined) remaining.set(i.leaseId!, open - settles);
      return {
        account: i.record.account,
        op: i.operationId,
        db: (-i.record.credits).toString(),
        dh: (-settles).toString(),
        hold: i.leaseId ?? null,
        key_hash: i.record.keyHash,
        meta: { request: i.record.requestId, key: i.record.keyName, model: i.record.model },
      };
    });
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
  const r = await q.query<{ operation_id: string }>(
    `WITH v AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(account TEXT, op TEXT, db BIGINT, dh BIGINT, hold TEXT, key_hash TEXT, meta JSONB)
     ), ins AS (
       INSERT INTO ledger (account, operation_id, kind, delta_balance, delta_held, hold_id, meta)
       SELECT account, op, 'capture', db, dh, hold, meta FROM v
       ON CONFLICT (operation_id, kind) DO NOTHING
       RETURNING account, operation_id, delta_balance, delta_held, hold_id
     ), acc AS (
       UPDATE accounts a SET balance = a.balance + s.db, held = a.held + s.dh, updated_at = now()
         FROM (SELECT account, SUM(delta_balance)::bigint AS db, SUM(delta_held)::bigint AS dh FROM ins GROUP BY account) s
        WHERE a.account = s.account
       RETURNING a.account
     ), lease AS (
       UPDATE holds h SET remaining = h.remaining + s.dh
         FROM (SELECT hold_id, SUM(delta_held)::bigint AS dh FROM ins WHERE hold_id IS NOT NULL GROUP BY hold_id) s
        WHERE h.hold_id = s.hold_id AND s.dh <> 0
       RETURNING h.hold_id
     ), spend AS (
       INSERT INTO key_spend (key_hash, spent)
       SELECT v.key_hash, -SUM(ins.delta_balance)::bigint FROM ins JOIN v ON v.op = ins.operation_id GROUP BY v.key_hash
       ON CONFLICT (key_hash) DO UPDATE SET spent = key_spend.spent + EXCLUDED.spent, updated_at = now()
       RETURNING key_hash
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
     SELECT operation_id FROM ins UNION SELECT operation_id FROM rec`,
    [JSON.stringify(captures), JSON.stringify(records)],
  );
  for (const row of r.rows) applied.add(row.operation_id);
  return { applied, lostLeases };
}
