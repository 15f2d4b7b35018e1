import { verifyLedger } from '../../proxy/billing/ledger.js';
import type { Queryable } from '../../proxy/store/index.js';

/**
 * One account's books as the benchmarks check them (the performance issue's "exact books after
 * every bench round"). Money is micro-credits, as decimal strings (JSON has no BigInt).
 */
export interface Books {
  /** Usage records: one per request the gateway charged. */
  records: number;
  /** What they charged, together. */
  usage: string;
  balance: string;
  /** Held by open holds: a replica's lease while it serves; 0 once every replica has shut down. */
  held: string;
  /** balance = what was granted - usage. */
  exact: boolean;
  /** Rows of the ledger that do not add up to the balances and holds (verifyLedger). */
  violations: number;
}

/** The account's books now. Balance and usage are read in one statement, so both are of one snapshot. */
export async function readBooks(q: Queryable, account: string, granted: bigint): Promise<Books> {
  const r = await q.query<{ balance: unknown; held: unknown; n: unknown; s: unknown }>(
    `SELECT a.balance, a.held, u.n, u.s
       FROM accounts a, (SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS s FROM usage_records WHERE account = $1) u
      WHERE a.account = $1`,
    [account],
  );
  const row = r.rows[0];
  if (!row) throw new Error(`no account "${account}"`);
  const balance = BigInt(row.balance as string);
  const usage = BigInt(row.s as string);
  return {
    records: Number(row.n),
    usage: usage.toString(),
    balance: balance.toString(),
    held: BigInt(row.held as string).toString(),
    exact: balance === granted - usage,
    violations: (await verifyLedger(q)).length,
  };
}

/**
 * How many requests a load may have had charged: at least every 200 answer it read to the end
 * (each was charged durably before its last byte), at most every request it sent (one the load
 * generator gave up on when it stopped may still be charged for what it used).
 */
export interface Charged {
  least: number;
  most: number;
}

/** What is wrong with books read after loads that together may have had `charged` charged ('' when nothing). */
export function booksProblem(b: Books, charged: Charged, atShutdown: boolean): string {
  const wrong: string[] = [];
  if (!b.exact) wrong.push(`balance ${b.balance} is not the grant less usage ${b.usage}`);
  if (b.violations > 0) wrong.push(`${b.violations} ledger violations`);
  if (b.records < charged.least) wrong.push(`${b.records} requests charged for ${charged.least} answers`);
  if (b.records > charged.most) wrong.push(`${b.records} requests charged, more than the ${charged.most} sent`);
  if (atShutdown && b.held !== '0') wrong.push(`${b.held} still held after shutdown`);
  return wrong.join('; ');
}
