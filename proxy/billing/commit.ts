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
 * Writes many requests' captures and usage records with ONE statement whatever the batch size:
 * the billing_commit() function of migration 006 (atomic on its own, so no BEGIN/COMMIT round
 * trips; the batch goes as two JSON parameters, since PGlite pays per statement and per bound
 * parameter). A capture settles against its lease at most what the lease has left; any excess
 * is charged to the balance alone (actual cost may exceed the hold). A replayed operation id
 * changes nothing. A lease already released (swept) settles nothing and is reported back as
 * lost. Returns the operation ids applied now.
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
  const r = await q.query<{ outcome: string; ref: string }>('SELECT outcome, ref FROM billing_commit($1::json, $2::json)', [JSON.stringify(captures), JSON.stringify(records)]);
  for (const row of r.rows) (row.outcome === 'lost' ? lostLeases : applied).add(row.ref);
  return { applied, lostLeases };
}
