import type { Queryable } from '../store/index.js';
import { fromMicro } from '../../api/snapshot/money.js';
import { GatewayError } from '../../kernel/errors.js';
import { big } from './money.js';

/**
 * The credit ledger's primitives. Each runs inside the caller's transaction (so a task can move
 * to its terminal state and settle its hold in one commit) and writes exactly one ledger row
 * with a unique (operation_id, kind): replaying an operation changes nothing and returns null.
 * Amounts are bigint micro-credits; parameters go to SQL as decimal strings.
 *
 * Row effects:  grant/adjustment  balance += amount
 *               hold              held += amount            (refused when balance - held < amount)
 *               capture           balance -= amount, held -= what it settles of its hold
 *               release/refund    held -= the hold's remaining amount
 */

export type SettleKind = 'release' | 'refund';

export interface HoldInput {
  account: string;
  holdId: string;
  amount: bigint;
  expiresAt: Date;
  /**
   * Who resolves the hold if nobody settles it: 'request' and 'lease' holds are released by the
   * billing sweeper once expired; 'task' holds only by the task engine (at the task's deadline).
   */
  purpose?: 'request' | 'lease' | 'task';
  /** The replica that owns the hold (leases); the sweeper releases a dead owner's holds. */
  owner?: string;
  /** sha256 of the key it is for: its captures count as that key's spend (spendLimit). */
  keyHash?: string;
  meta?: Record<string, unknown>;
}

export interface AccountState {
  balance: bigint;
  held: bigint;
}

export class InsufficientCreditsError extends GatewayError {
  constructor(
    readonly account: string,
    readonly needed: bigint,
  ) {
    super('insufficient_credits', 'insufficient credits: the account cannot cover this request (see GET /v1/credits)');
  }
}

export class SpendLimitError extends GatewayError {
  constructor(readonly limit: bigint) {
    super('spend_limit_reached', `this key has reached its spend limit of ${fromMicro(limit)} credits (see GET /v1/credits)`);
  }
}

const json = (m?: Record<string, unknown>) => (m ? JSON.stringify(m) : null);

async function ensureAccount(q: Queryable, account: string): Promise<void> {
  await q.query('INSERT INTO accounts (account) VALUES ($1) ON CONFLICT (account) DO NOTHING', [account]);
}

/** Adds credits (grant: positive; adjustment: either sign). Returns false when already applied. */
export async function credit(
  q: Queryable,
  input: { account: string; operationId: string; amount: bigint; kind?: 'grant' | 'adjustment'; meta?: Record<string, unknown> },
): Promise<boolean> {
  const kind = input.kind ?? 'grant';
  if (kind === 'grant' && input.amount <= 0n) throw new RangeError('a grant must be positive');
  await ensureAccount(q, input.account);
  const r = await q.query(
    `INSERT INTO ledger (account, operation_id, kind, delta_balance, meta) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (operation_id, kind) DO NOTHING RETURNING id`,
    [input.account, input.operationId, kind, input.amount.toString(), json(input.meta)],
  );
  if (r.rows.length === 0) return false;
  await q.query('UPDATE accounts SET balance = balance + $2, updated_at = now() WHERE account = $1', [input.account, input.amount.toString()]);
  return true;
}

/**
 * Reserves `amount` if the account's available credits (balance - held) cover it, atomically.
 * Throws InsufficientCreditsError otherwise (the caller's transaction then rolls back). Returns
 * false when this hold already exists (a replay).
 */
export async function hold(q: Queryable, h: HoldInput): Promise<boolean> {
  if (h.amount < 0n) throw new RangeError('a hold cannot be negative');
  const seen = await q.query("SELECT 1 FROM ledger WHERE operation_id = $1 AND kind = 'hold'", [h.holdId]);
  if (seen.rows.length > 0) return false;
  const ok = await q.query('UPDATE accounts SET held = held + $2, updated_at = now() WHERE account = $1 AND balance - held >= $2 RETURNING account', [
    h.account,
    h.amount.toString(),
  ]);
  if (ok.rows.length === 0) throw new InsufficientCreditsError(h.account, h.amount);
  await q.query(`INSERT INTO ledger (account, operation_id, kind, delta_held, meta) VALUES ($1, $2, 'hold', $3, $4)`, [
    h.account,
    h.holdId,
    h.amount.toString(),
    json(h.meta),
  ]);
  await q.query(
    'INSERT INTO holds (hold_id, account, amount, remaining, expires_at, purpose, owner, key_hash, meta) VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8)',
    [h.holdId, h.account, h.amount.toString(), h.expiresAt.toISOString(), h.purpose ?? 'request', h.owner ?? null, h.keyHash ?? null, json(h.meta)],
  );
  return true;
}

/** A replica's lease on an account to take or grow (topUpLease). */
export interface LeaseTopUp {
  account: string;
  /** The lease to grow, if the replica has one, and the growth's operation id (a replay writes nothing). */
  grow: { leaseId: string; topUpId: string } | undefined;
  /** The lease taken when there is none, or the one to grow is gone (released by a sweeper). */
  newLeaseId: string;
  /** What the replica lacks: refused unless the account has this much free. */
  shortfall: bigint;
  /** Taken beyond the shortfall, or half of what is free beyond it if less. */
  slice: bigint;
  expiresAt: Date;
  owner: string;
}

/**
 * Takes or grows a replica's lease in one statement (billing_lease_topup(), migration 041): the
 * lease's row and the account's locked in the ledger's order, the same check as hold(), a
 * 'hold' row (a growth's points at the lease it grows). Refused, nothing written, when the
 * account has less free than the shortfall; `free` is what it had. A replayed operation id writes
 * nothing and returns what it would have taken.
 */
export async function topUpLease(q: Queryable, t: LeaseTopUp): Promise<{ outcome: 'refused' | 'grown' | 'taken'; free: bigint; took: bigint }> {
  const r = await q.query<{ outcome: 'refused' | 'grown' | 'taken'; free: unknown; took: unknown }>(
    'SELECT outcome, free, took FROM billing_lease_topup($1, $2, $3, $4, $5, $6, $7, $8)',
    [t.account, t.grow?.leaseId ?? null, t.grow?.topUpId ?? null, t.newLeaseId, t.shortfall.toString(), t.slice.toString(), t.expiresAt.toISOString(), t.owner],
    { prepare: 'billing_lease_topup' },
  );
  const row = r.rows[0]!;
  return { outcome: row.outcome, free: big(row.free), took: big(row.took) };
}

/**
 * Refuses (SpendLimitError) when the key's captured spend plus its open holds plus `amount`
 * would pass `limit`. Run it in the transaction that then holds, after locking the key's
 * spend row, so two submissions of one key cannot both pass.
 */
export async function checkKeySpend(q: Queryable, keyHash: string, amount: bigint, limit: bigint): Promise<void> {
  await q.query('INSERT INTO key_spend (key_hash) VALUES ($1) ON CONFLICT (key_hash) DO NOTHING', [keyHash]);
  const r = await q.query<{ spent: unknown; open: unknown }>(
    `SELECT s.spent, (SELECT COALESCE(SUM(remaining), 0) FROM holds WHERE key_hash = $1) AS open FROM key_spend s WHERE s.key_hash = $1 FOR UPDATE`,
    [keyHash],
  );
  const row = r.rows[0];
  if (big(row?.spent) + big(row?.open) + amount > limit) throw new SpendLimitError(limit);
}

/** hold() for one key's request: refused with SpendLimitError first when the key has a spend limit. */
export async function holdForKey(q: Queryable, h: HoldInput & { keyHash: string }, spendLimit: bigint | undefined): Promise<boolean> {
  if (spendLimit !== undefined) {
    // Account before key spend: the order every ledger writer (and the group commit) locks them in.
    await q.query('SELECT 1 FROM accounts WHERE account = $1 FOR UPDATE', [h.account]);
    await checkKeySpend(q, h.keyHash, h.amount, spendLimit);
  }
  return hold(q, h);
}

/** The key's captured spend (micro-credits). */
export async function keySpent(q: Queryable, keyHash: string): Promise<bigint> {
  const r = await q.query<{ spent: unknown }>('SELECT spent FROM key_spend WHERE key_hash = $1', [keyHash]);
  return big(r.rows[0]?.spent);
}

interface OpenHold {
  account: string;
  remaining: bigint;
  keyHash: string | null;
}

async function lockHold(q: Queryable, holdId: string): Promise<OpenHold | undefined> {
  const r = await q.query<{ account: string; remaining: unknown; key_hash: string | null }>(
    'SELECT account, remaining, key_hash FROM holds WHERE hold_id = $1 FOR UPDATE',
    [holdId],
  );
  const row = r.rows[0];
  return row ? { account: row.account, remaining: big(row.remaining), keyHash: row.key_hash } : undefined;
}

/** Adds captured credits to keys' spend (one statement for many keys). */
export async function addKeySpend(q: Queryable, spend: Map<string, bigint>): Promise<void> {
  const keys = [...spend.entries()].filter(([, v]) => v !== 0n);
  if (keys.length === 0) return;
  const values = keys.map((_, i) => `($${2 * i + 1}, $${2 * i + 2}::bigint)`).join(', ');
  await q.query(
    `INSERT INTO key_spend (key_hash, spent) VALUES ${values} ON CONFLICT (key_hash) DO UPDATE SET spent = key_spend.spent + EXCLUDED.spent, updated_at = now()`,
    keys.flatMap(([k, v]) => [k, v.toString()]),
  );
}

/**
 * Charges `amount` against a hold. close (default): the hold ends and whatever it had left is
 * released by the same row. close: false (leases): the hold shrinks by what this capture uses of
 * it and stays open. An amount above the hold is charged in full (the balance may go below the
 * holds; the next hold sees it). Returns null when the hold is gone or the capture was applied.
 */
export async function capture(
  q: Queryable,
  c: { holdId: string; amount: bigint; operationId?: string; close?: boolean; meta?: Record<string, unknown> },
): Promise<{ captured: bigint; released: bigint } | null> {
  if (c.amount < 0n) throw new RangeError('a capture cannot be negative');
  const h = await lockHold(q, c.holdId);
  if (!h) return null;
  const close = c.close ?? true;
  const settles = close ? h.remaining : c.amount < h.remaining ? c.amount : h.remaining;
  const r = await q.query(
    `INSERT INTO ledger (account, operation_id, kind, delta_balance, delta_held, hold_id, meta) VALUES ($1, $2, 'capture', $3, $4, $5, $6)
     ON CONFLICT (operation_id, kind) DO NOTHING RETURNING id`,
    [h.account, c.operationId ?? c.holdId, (-c.amount).toString(), (-settles).toString(), c.holdId, json(c.meta)],
  );
  if (r.rows.length === 0) return null;
  await q.query('UPDATE accounts SET balance = balance - $2, held = held - $3, updated_at = now() WHERE account = $1', [
    h.account,
    c.amount.toString(),
    settles.toString(),
  ]);
  if (close) await q.query('DELETE FROM holds WHERE hold_id = $1', [c.holdId]);
  else await q.query('UPDATE holds SET remaining = remaining - $2 WHERE hold_id = $1', [c.holdId, settles.toString()]);
  if (h.keyHash) await addKeySpend(q, new Map([[h.keyHash, c.amount]]));
  const released = close ? (h.remaining > c.amount ? h.remaining - c.amount : 0n) : 0n;
  return { captured: c.amount, released };
}

/** Ends a hold without a charge: `release` (nothing was used) or `refund` (a failed task). */
export async function release(
  q: Queryable,
  r: { holdId: string; kind?: SettleKind; operationId?: string; meta?: Record<string, unknown> },
): Promise<bigint | null> {
  const h = await lockHold(q, r.holdId);
  if (!h) return null;
  const ins = await q.query(
    `INSERT INTO ledger (account, operation_id, kind, delta_held, hold_id, meta) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (operation_id, kind) DO NOTHING RETURNING id`,
    [h.account, r.operationId ?? r.holdId, r.kind ?? 'release', (-h.remaining).toString(), r.holdId, json(r.meta)],
  );
  if (ins.rows.length === 0) return null;
  await q.query('UPDATE accounts SET held = held - $2, updated_at = now() WHERE account = $1', [h.account, h.remaining.toString()]);
  await q.query('DELETE FROM holds WHERE hold_id = $1', [r.holdId]);
  return h.remaining;
}

export async function accountState(q: Queryable, account: string): Promise<AccountState> {
  const r = await q.query<{ balance: unknown; held: unknown }>('SELECT balance, held FROM accounts WHERE account = $1', [account]);
  const row = r.rows[0];
  return { balance: big(row?.balance), held: big(row?.held) };
}

/**
 * The ledger invariant, recomputed from the rows: for every account, balance and held equal the
 * sums of its rows, and every open hold's remaining equals its rows' sum. Returns the violations
 * (empty when consistent). Used by tests and the admin consistency check.
 */
export async function verifyLedger(q: Queryable): Promise<string[]> {
  const out: string[] = [];
  const accounts = await q.query<{ account: string; balance: unknown; held: unknown; sb: unknown; sh: unknown }>(
    `SELECT a.account, a.balance, a.held, COALESCE(SUM(l.delta_balance), 0) AS sb, COALESCE(SUM(l.delta_held), 0) AS sh
       FROM accounts a LEFT JOIN ledger l ON l.account = a.account GROUP BY a.account, a.balance, a.held`,
  );
  for (const a of accounts.rows) {
    if (big(a.balance) !== big(a.sb)) out.push(`account ${a.account}: balance ${big(a.balance)} != rows ${big(a.sb)}`);
    if (big(a.held) !== big(a.sh)) out.push(`account ${a.account}: held ${big(a.held)} != rows ${big(a.sh)}`);
  }
  const holds = await q.query<{ hold_id: string; remaining: unknown; s: unknown }>(
    `SELECT h.hold_id, h.remaining,
            (SELECT COALESCE(SUM(l.delta_held), 0) FROM ledger l WHERE (l.operation_id = h.hold_id AND l.kind = 'hold') OR l.hold_id = h.hold_id) AS s
       FROM holds h`,
  );
  for (const h of holds.rows) {
    if (big(h.remaining) !== big(h.s)) out.push(`hold ${h.hold_id}: remaining ${big(h.remaining)} != rows ${big(h.s)}`);
  }
  const closed = await q.query<{ hold_id: string; s: unknown }>(
    `SELECT l.operation_id AS hold_id, SUM(x.delta_held) AS s
       FROM ledger l JOIN ledger x ON (x.operation_id = l.operation_id AND x.kind = 'hold') OR x.hold_id = l.operation_id
      WHERE l.kind = 'hold' AND l.hold_id IS NULL AND NOT EXISTS (SELECT 1 FROM holds h WHERE h.hold_id = l.operation_id)
      GROUP BY l.operation_id`,
  );
  for (const h of closed.rows) {
    if (big(h.s) !== 0n) out.push(`closed hold ${h.hold_id}: rows leave ${big(h.s)} held`);
  }
  return out;
}
