import type { Queryable } from '../store/index.js';
import { addKeySpend } from './ledger.js';
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

function placeholders(rows: number, cols: number, casts: Record<number, string> = {}): string {
  const out: string[] = [];
  for (let r = 0; r < rows; r++) {
    const cells: string[] = [];
    for (let c = 0; c < cols; c++) cells.push(`$${r * cols + c + 1}${casts[c] ?? ''}`);
    out.push(`(${cells.join(', ')})`);
  }
  return out.join(', ');
}

/**
 * Writes many requests' captures and usage records in the caller's transaction, with a fixed
 * number of statements whatever the batch size: lock the leases, insert the capture rows (a
 * replayed operation id is skipped by the unique (operation_id, kind)), then apply exactly the
 * inserted rows to accounts, leases and key spend, and insert the usage records. A capture
 * settles against its lease at most what the lease has left; any excess is charged to the
 * balance alone (actual cost may exceed the hold). A lease already released (swept) settles
 * nothing and is reported back as lost. Returns the operation ids that were applied now.
 */
export async function writeCaptures(q: Queryable, items: CaptureItem[]): Promise<{ applied: Set<string>; lostLeases: Set<string> }> {
  const applied = new Set<string>();
  const lostLeases = new Set<string>();
  if (items.length === 0) return { applied, lostLeases };

  const leaseIds = [...new Set(items.map((i) => i.leaseId).filter((x): x is string => x !== undefined))];
  const remaining = new Map<string, bigint>();
  if (leaseIds.length) {
    const r = await q.query<{ hold_id: string; remaining: unknown }>(
      `SELECT hold_id, remaining FROM holds WHERE hold_id IN (${leaseIds.map((_, i) => `$${i + 1}`).join(', ')}) ORDER BY hold_id FOR UPDATE`,
      leaseIds,
    );
    for (const row of r.rows) remaining.set(row.hold_id, big(row.remaining));
    for (const id of leaseIds) if (!remaining.has(id)) lostLeases.add(id);
  }

  const charged = items.filter((i) => i.record.credits > 0n);
  const settles = new Map<string, bigint>();
  if (charged.length) {
    const params: unknown[] = [];
    for (const i of charged) {
      const open = i.leaseId !== undefined ? remaining.get(i.leaseId) : undefined;
      const s = open === undefined ? 0n : open < i.record.credits ? open : i.record.credits;
      if (open !== undefined) remaining.set(i.leaseId!, open - s);
      settles.set(i.operationId, s);
      params.push(
        i.record.account,
        i.operationId,
        (-i.record.credits).toString(),
        (-s).toString(),
        i.leaseId ?? null,
        JSON.stringify({ request: i.record.requestId, key: i.record.keyName, model: i.record.model }),
      );
    }
    const r = await q.query<{ operation_id: string }>(
      `INSERT INTO ledger (account, operation_id, kind, delta_balance, delta_held, hold_id, meta)
       SELECT v.account, v.op, 'capture', v.db, v.dh, v.hold, v.meta::jsonb
         FROM (VALUES ${placeholders(charged.length, 6, { 2: '::bigint', 3: '::bigint' })}) AS v(account, op, db, dh, hold, meta)
       ON CONFLICT (operation_id, kind) DO NOTHING RETURNING operation_id`,
      params,
    );
    for (const row of r.rows) applied.add(row.operation_id);
  }

  const byAccount = new Map<string, { balance: bigint; held: bigint }>();
  const byLease = new Map<string, bigint>();
  const byKey = new Map<string, bigint>();
  for (const i of charged) {
    if (!applied.has(i.operationId)) continue;
    const s = settles.get(i.operationId)!;
    const a = byAccount.get(i.record.account) ?? { balance: 0n, held: 0n };
    a.balance += i.record.credits;
    a.held += s;
    byAccount.set(i.record.account, a);
    if (i.leaseId !== undefined && s > 0n) byLease.set(i.leaseId, (byLease.get(i.leaseId) ?? 0n) + s);
    byKey.set(i.record.keyHash, (byKey.get(i.record.keyHash) ?? 0n) + i.record.credits);
  }
  for (const [account, d] of [...byAccount].sort(([a], [b]) => (a < b ? -1 : 1))) {
    await q.query('UPDATE accounts SET balance = balance - $2, held = held - $3, updated_at = now() WHERE account = $1', [account, d.balance.toString(), d.held.toString()]);
  }
  for (const [lease, s] of byLease) await q.query('UPDATE holds SET remaining = remaining - $2 WHERE hold_id = $1', [lease, s.toString()]);
  await addKeySpend(q, byKey);

  // Records of free requests (errors before the first byte, zero usage) have no ledger row to
  // deduplicate on: their own unique operation id does it.
  const records = items.filter((i) => i.record.credits === 0n || applied.has(i.operationId));
  if (records.length) {
    const params: unknown[] = [];
    for (const i of records) {
      const r = i.record;
      params.push(
        i.operationId,
        r.requestId,
        r.keyName,
        r.keyHash,
        r.account,
        r.group,
        r.model,
        r.upstreamModel,
        r.protocol,
        r.usage.inputTokens,
        r.usage.cachedInputTokens,
        r.usage.cacheWriteTokens,
        r.usage.outputTokens,
        r.usage.reasoningTokens,
        r.credits.toString(),
        r.usageSource,
        r.status,
        r.httpStatus,
        Math.round(r.latencyMs),
        r.ttftMs === undefined ? null : Math.round(r.ttftMs),
      );
    }
    const casts = { 9: '::bigint', 10: '::bigint', 11: '::bigint', 12: '::bigint', 13: '::bigint', 14: '::bigint', 17: '::int', 18: '::int', 19: '::int' };
    const r = await q.query<{ operation_id: string }>(
      `INSERT INTO usage_records (operation_id, request_id, key_name, key_hash, account, group_name, model, upstream_model, protocol,
         input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, credits, usage_source, status,
         http_status, latency_ms, ttft_ms)
       VALUES ${placeholders(records.length, 20, casts)}
       ON CONFLICT (operation_id) DO NOTHING RETURNING operation_id`,
      params,
    );
    for (const row of r.rows) applied.add(row.operation_id);
  }
  return { applied, lostLeases };
}
