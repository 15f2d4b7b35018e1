import type { Queryable, Store } from '../store/index.js';
import { big } from './money.js';

/** Spend of a key with a spendLimit, as this replica sees it. */
export interface KeySpend {
  /** Captured spend and open task holds, as last read or written by this replica. */
  stored: bigint;
  /** Settled here, not yet written. */
  unflushed: bigint;
  reserved: bigint;
  loaded: Promise<void>;
  lastUsed: number;
  /** Counts this replica's writes to `stored`: a re-read that raced one is dropped. */
  writes: number;
}

/**
 * Keys' spend limits: what each limited key has spent (read once, then kept up to date by this
 * replica's own charges and re-read while idle, since other replicas and task holds move it too).
 */
export class SpendLimits {
  private readonly keys = new Map<string, KeySpend>();

  constructor(private readonly store: Store) {}

  /** The key's spend, loading it on first use (await `loaded` before reading). */
  of(keyHash: string): KeySpend {
    let k = this.keys.get(keyHash);
    if (!k) {
      const state: KeySpend = { stored: 0n, unflushed: 0n, reserved: 0n, loaded: Promise.resolve(), lastUsed: Date.now(), writes: 0 };
      state.loaded = readKeySpend(this.store, keyHash).then(
        (v) => {
          state.stored = v;
        },
        (err: Error) => {
          this.keys.delete(keyHash);
          throw err;
        },
      );
      this.keys.set(keyHash, (k = state));
    }
    return k;
  }

  /**
   * Forgets keys unused for `forgetAfterMs`, then re-reads the idle ones in one query: keys with
   * nothing reserved or unwritten here, so the store has all this replica charged them. A key that
   * any of this replica's requests holds or settles while the query runs keeps what it has. Other
   * keys' pending writes do not matter: behind a journal a busy replica always has some.
   */
  async refresh(now: number, forgetAfterMs: number): Promise<void> {
    for (const [hash, k] of this.keys) {
      if (k.reserved === 0n && k.unflushed === 0n && now - k.lastUsed >= forgetAfterMs) this.keys.delete(hash);
    }
    const idle = [...this.keys].filter(([, k]) => k.reserved === 0n && k.unflushed === 0n);
    if (idle.length === 0) return;
    const seen = new Map(idle.map(([hash, k]) => [hash, k.writes]));
    const r = await this.store.query<{ key_hash: string; spent: unknown; open: unknown }>(
      `SELECT k.key_hash, (SELECT spent FROM key_spend s WHERE s.key_hash = k.key_hash) AS spent,
              (SELECT COALESCE(SUM(remaining), 0) FROM holds h WHERE h.key_hash = k.key_hash) AS open
         FROM json_array_elements_text($1::json) AS k(key_hash)`,
      [JSON.stringify(idle.map(([hash]) => hash))],
    );
    for (const row of r.rows) {
      const k = this.keys.get(row.key_hash);
      if (k && k.reserved === 0n && k.unflushed === 0n && k.writes === seen.get(row.key_hash)) k.stored = big(row.spent) + big(row.open);
    }
  }
}

/** Captured spend plus open holds of the key (tasks in progress). */
async function readKeySpend(q: Queryable, keyHash: string): Promise<bigint> {
  const r = await q.query<{ spent: unknown; open: unknown }>(
    `SELECT (SELECT spent FROM key_spend WHERE key_hash = $1) AS spent, (SELECT COALESCE(SUM(remaining), 0) FROM holds WHERE key_hash = $1) AS open`,
    [keyHash],
  );
  return big(r.rows[0]?.spent) + big(r.rows[0]?.open);
}
