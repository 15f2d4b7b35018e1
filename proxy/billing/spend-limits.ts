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
  /** The last request's time (performance.now()): a key unused for a while is forgotten. */
  lastUsed: number;
  /** Counts this replica's writes to `stored`: a re-read that raced one is dropped. */
  writes: number;
  /** The first read is in: a later read may replace `stored`. */
  ready: boolean;
}

/** Idle keys re-read after one group commit, at most. */
const IDLE_SLICE = 256;

/**
 * Keys' spend limits: what each limited key has spent (read once, then kept up to date by this
 * replica's own charges and re-read while idle, since other replicas and task holds move it too).
 */
export class SpendLimits {
  private readonly keys = new Map<string, KeySpend>();
  /** The known keys in the order afterCommit() re-reads the idle ones, and where it is. */
  private idleTurns: string[] = [];
  private turn = 0;

  constructor(private readonly store: Store) {}

  /** The key's spend, loading it on first use (await `loaded` before reading). */
  of(keyHash: string): KeySpend {
    let k = this.keys.get(keyHash);
    if (!k) {
      const state: KeySpend = { stored: 0n, unflushed: 0n, reserved: 0n, loaded: Promise.resolve(), lastUsed: performance.now(), writes: 0, ready: false };
      state.loaded = readSpends(this.store, [keyHash]).then(
        (v) => {
          state.stored = v.get(keyHash)!;
          state.ready = true;
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
    for (const [hash, spend] of await readSpends(this.store, [...seen.keys()])) {
      const k = this.keys.get(hash);
      if (k?.ready && k.reserved === 0n && k.unflushed === 0n && k.writes === seen.get(hash)) k.stored = spend;
    }
  }

  /**
   * Re-reads keys right after one of this replica's group commits and before the next can start:
   * the store then holds every charge of this replica but those still in `unflushed` (a commit's
   * settlements run before any other I/O), so what it reads is `stored` as it stands. Keys in
   * steady use here are never idle for refresh(); this is how they learn what other replicas
   * charged them. Read: the busy keys (charged by this commit, or with requests in flight), and
   * the others in turn, IDLE_SLICE a commit: while it knows no more keys than that, every commit
   * reads them all.
   * Reading every known key after every commit, as until 2026-11-29, took PostgreSQL about 3 µs a
   * key, which the next commit waited for (10,000 keys: 31 ms a commit; `npm run bench:spend-limits`).
   */
  async afterCommit(charged: ReadonlySet<string>): Promise<void> {
    const read: string[] = [];
    const busy = (hash: string, k: KeySpend) => k.reserved > 0n || charged.has(hash);
    for (const [hash, k] of this.keys) if (busy(hash, k)) read.push(hash);
    if (this.turn >= this.idleTurns.length) {
      this.idleTurns = [...this.keys.keys()];
      this.turn = 0;
    }
    const end = Math.min(this.turn + IDLE_SLICE, this.idleTurns.length);
    for (; this.turn < end; this.turn++) {
      const hash = this.idleTurns[this.turn]!;
      const k = this.keys.get(hash);
      if (k && !busy(hash, k)) read.push(hash);
    }
    if (read.length === 0) return;
    for (const [hash, spend] of await readSpends(this.store, read)) {
      const k = this.keys.get(hash);
      if (!k?.ready) continue;
      k.stored = spend;
      // A refresh() read started before this commit is older: it is dropped.
      k.writes++;
    }
  }
}

/** Captured spend plus open holds (tasks in progress) of each key, in one query. */
async function readSpends(q: Queryable, keyHashes: string[]): Promise<Map<string, bigint>> {
  const r = await q.query<{ key_hash: string; spent: unknown; open: unknown }>(
    `SELECT k.key_hash, (SELECT spent FROM key_spend s WHERE s.key_hash = k.key_hash) AS spent,
            (SELECT COALESCE(SUM(remaining), 0) FROM holds h WHERE h.key_hash = k.key_hash) AS open
       FROM json_array_elements_text($1::json) AS k(key_hash)`,
    [JSON.stringify(keyHashes)],
  );
  return new Map(r.rows.map((row) => [row.key_hash, big(row.spent) + big(row.open)]));
}
