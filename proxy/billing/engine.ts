import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Settings } from '../../kernel/settings.js';
import { GatewayError } from '../../kernel/errors.js';
import type { Registry } from 'prom-client';
import type { Logger } from '../../kernel/log.js';
import type { Queryable, Store } from '../store/index.js';
import { commitRecord, writeCommitLines } from './commit.js';
import { BillingJournal, LOCK_STALE_MS, type JournalSegment } from './journal.js';
import { extendHold, hold, InsufficientCreditsError, release, SpendLimitError } from './ledger.js';
import { billingMetrics, type BillingMetrics } from './metrics.js';
import { chatCost, chatHold } from './pricing.js';
import { billingSettings, type BillingSettings } from './settings.js';
import { sweepExpiredHolds } from './sweeper.js';
import type { Billing, ChatCharge, ChatQuote, ChatSettlement } from './types.js';

/**
 * Metered chat billing, shaped like telecom online charging. A replica leases a slice of an
 * account's credits in one store transaction (a 'lease' hold it owns), admits requests against
 * it in memory (the check and the reservation are one synchronous step, so concurrency cannot
 * overspend), tops the lease up when a request does not fit, and hands it back when idle or at
 * shutdown. Settled requests are written in group commits (one transaction for every capture
 * and usage record that queued while the previous one ran) and settle() resolves only once its
 * capture is durable (in the store, or first in a local journal that the store is written
 * behind), so the chat handler sends a stream's last event after the charge. A
 * replica that dies leaves its lease behind: its deadline stops moving and the sweeper, which
 * every replica runs, releases it.
 */

interface AccountLease {
  account: string;
  /** The open lease hold, if any. */
  leaseId: string | undefined;
  /** The lease's deadline as last written to the store (ms); past it, another replica's sweeper may release it. */
  validUntil: number;
  generation: number;
  topups: number;
  /** What the lease has left once every capture settled so far is written. */
  remaining: bigint;
  /** Holds of requests in flight. */
  reserved: bigint;
  inflight: number;
  /** Captures queued or being written for this account. */
  writing: number;
  lastUsed: number;
  /** Top-ups and hand-backs of one account run one at a time. */
  chain: Promise<unknown>;
  /** What the account had free when a top-up last failed, and when: a burst of refusals costs one query. */
  refused: { free: bigint; at: number } | undefined;
}

/** Spend of a key with a spendLimit, as this replica sees it. */
interface KeySpendState {
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

interface Queued {
  /** The capture as billing_commit() takes it, serialized once (it is also the journal's line). */
  line: string;
  /** The journal segment that already holds it durably, if the engine has a journal. */
  seg: JournalSegment | undefined;
  resolve(): void;
  reject(err: Error): void;
}

const big = (v: unknown): bigint => (v === null || v === undefined ? 0n : BigInt(v as string | number | bigint));

export class BillingEngine implements Billing {
  readonly replica = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly opPrefix = `${randomBytes(9).toString('base64url')}.`;
  private opCount = 0;
  private readonly accounts = new Map<string, AccountLease>();
  private readonly keys = new Map<string, KeySpendState>();
  private queue: Queued[] = [];
  /** Group commits in flight (PostgreSQL: up to two overlap, one waiting on the other's lease lock; PGlite: one). */
  private writers = new Set<Promise<void>>();
  private readonly timers: NodeJS.Timeout[] = [];
  /** Ends the linger of commits waiting to gather more (shutdown, or a full batch). */
  private readonly lingering = new Set<() => void>();
  private closing: Promise<void> | undefined;
  /** Chat requests holding credits on this replica (admitted, not yet settled). */
  private inflight = 0;

  private readonly metrics: BillingMetrics | undefined;
  private readonly journal: BillingJournal | undefined;
  /** Replay of what a previous process left in the journal, then the first sweep. */
  private readonly started: Promise<void>;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    readonly settings: BillingSettings = billingSettings(),
    registry?: Registry,
  ) {
    this.metrics = registry ? billingMetrics(registry) : undefined;
    const every = (ms: number, fn: () => unknown, what: string) => {
      const t = setInterval(
        () =>
          void Promise.resolve()
            .then(fn)
            .catch((err: Error) => this.log.error(`billing ${what} failed`, { error: err.message })),
        ms,
      );
      t.unref();
      this.timers.push(t);
    };
    every(Math.max(50, Math.min(settings.leaseMs / 3, settings.idleMs / 2)), () => this.tick(), 'lease upkeep');
    every(settings.sweepIntervalMs, () => this.sweep(), 'sweeper');
    // Opened here, synchronously, so a directory another live process holds stops the start.
    this.journal = settings.journalDir ? new BillingJournal(settings.journalDir) : undefined;
    if (this.journal) {
      const j = this.journal;
      every(LOCK_STALE_MS / 6, () => j.touch(), 'journal lock touch');
    }
    // At start too: a restart on the same database resolves what the previous process left,
    // after the charges it left in the journal are in (its leases may still take them).
    this.started = this.replayJournal()
      .then(() => this.sweep())
      .then(
        () => {},
        (err: Error) => this.log.error('billing start-up recovery failed', { error: err.message }),
      );
  }

  async holdChat(quote: ChatQuote): Promise<ChatCharge> {
    if (this.closing) throw new GatewayError('not_ready', 'the gateway is shutting down; retry on another replica');
    const amount = chatHold(quote.prices, quote.estimatedInputTokens, quote.maxOutputTokens);
    const limit = quote.spendLimitMicro;
    const key = limit !== undefined ? this.keyState(quote.keyHash) : undefined;
    if (key) {
      key.lastUsed = Date.now();
      await key.loaded;
    }
    const acct = this.account(quote.account);
    acct.inflight++; // keeps the lease from being handed back while this request waits
    try {
      if (key && key.stored + key.unflushed + key.reserved + amount > limit!) throw new SpendLimitError(limit!);
      // A lease whose deadline could not be pushed forward lately (the store unreachable) may be
      // released by another replica's sweeper: admit nothing more against it until it is renewed.
      if (acct.leaseId && Date.now() > acct.validUntil - this.settings.leaseMs / 3) await this.renew(acct);
      while (amount > 0n && acct.remaining - acct.reserved < amount) await this.topUp(acct, amount);
      // From the checks to the reservation nothing awaits: concurrent requests see each other.
      if (key && key.stored + key.unflushed + key.reserved + amount > limit!) throw new SpendLimitError(limit!);
    } catch (err) {
      acct.inflight--;
      if (err instanceof GatewayError) this.metrics?.refusals.inc({ reason: err.code });
      throw err;
    }
    acct.reserved += amount;
    acct.lastUsed = Date.now();
    this.inflight++;
    if (key) key.reserved += amount;
    // Unique without a random draw per request: this replica's random id and a counter.
    const operationId = `chat:${this.opPrefix}${(++this.opCount).toString(36)}`;
    let settled: Promise<void> | undefined;
    return {
      heldMicro: amount,
      settle: (outcome) => (settled ??= this.settle(quote, amount, operationId, acct, key, outcome)),
    };
  }

  private async settle(
    quote: ChatQuote,
    amount: bigint,
    operationId: string,
    acct: AccountLease,
    key: KeySpendState | undefined,
    o: ChatSettlement,
  ): Promise<void> {
    const cost = o.usage ? chatCost(quote.prices, o.usage) : 0n;
    acct.reserved -= amount;
    acct.inflight--;
    this.inflight--;
    acct.lastUsed = Date.now();
    const leaseId = acct.leaseId;
    const settles = acct.remaining < cost ? acct.remaining : cost;
    acct.remaining -= settles;
    if (key) {
      key.reserved -= amount;
      key.unflushed += cost;
    }
    const usage = o.usage ?? { inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 };
    const line = JSON.stringify(
      commitRecord({
        operationId,
        leaseId,
        record: {
          requestId: quote.requestId,
          keyName: quote.keyName,
          keyHash: quote.keyHash,
          account: quote.account,
          group: quote.group,
          model: quote.model,
          upstreamModel: o.upstreamModel,
          protocol: quote.protocol,
          usage,
          credits: cost,
          usageSource: o.usage ? o.usageSource : 'estimated',
          status: o.status,
          httpStatus: o.httpStatus,
          latencyMs: o.latencyMs,
          ...(o.ttftMs !== undefined ? { ttftMs: o.ttftMs } : {}),
        },
      }),
    );
    // Not written (the journal or the store kept failing): nothing was charged, so the lease still has it.
    const undo = () => {
      if (acct.leaseId === leaseId) acct.remaining += settles;
      if (key) key.unflushed -= cost;
    };
    acct.writing++;
    let seg: JournalSegment | undefined;
    try {
      if (this.journal) seg = await this.journal.append(line);
    } catch (err) {
      acct.writing--;
      undo();
      throw err;
    }
    const stored = this.enqueue(line, seg)
      .then(
        () => {
          if (key) {
            key.unflushed -= cost;
            key.stored += cost;
            key.writes++;
          }
        },
        (err: Error) => {
          // Journaled: the next start replays it, so it is charged, only later.
          if (seg) return;
          undo();
          throw err;
        },
      )
      .finally(() => acct.writing--);
    // With a journal the charge is durable already; the store write follows behind.
    if (!seg) return stored;
    this.metrics?.journalPending.inc();
    void stored.finally(() => this.metrics?.journalPending.dec());
  }

  /** Charges a previous process left in the journal go to the store before this one sweeps. */
  private async replayJournal(): Promise<void> {
    const j = this.journal;
    if (!j || j.leftover.length === 0) return;
    const n = await j.replayLeftover((records) => this.write(records, true));
    this.log.info('billing journal replayed', { segments: j.leftover.length, requests: n });
  }

  /** Flushes pending captures and hands every lease back. New requests are refused meanwhile. */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      for (const t of this.timers) clearInterval(t);
      await this.started;
      for (const wake of this.lingering) wake();
      while (this.writers.size || this.queue.length) {
        this.kick();
        await Promise.all(this.writers);
      }
      // What the store has is deleted from the journal; what it could not take stays for the next start.
      await this.journal?.close();
      for (const acct of this.accounts.values()) await this.serial(acct, () => this.handBack(acct));
    })());
  }

  /** Runs the sweeper once now (at start and from the timer; tests call it directly). */
  async sweep(): Promise<number> {
    const n = await sweepExpiredHolds(this.store);
    if (n > 0) {
      this.metrics?.swept.inc(n);
      this.log.info('released expired holds', { count: n });
    }
    return n;
  }

  private account(account: string): AccountLease {
    let a = this.accounts.get(account);
    if (!a) {
      a = {
        account,
        leaseId: undefined,
        validUntil: 0,
        generation: 0,
        topups: 0,
        remaining: 0n,
        reserved: 0n,
        inflight: 0,
        writing: 0,
        lastUsed: Date.now(),
        chain: Promise.resolve(),
        refused: undefined,
      };
      this.accounts.set(account, a);
    }
    return a;
  }

  private keyState(keyHash: string): KeySpendState {
    let k = this.keys.get(keyHash);
    if (!k) {
      const state: KeySpendState = { stored: 0n, unflushed: 0n, reserved: 0n, loaded: Promise.resolve(), lastUsed: Date.now(), writes: 0 };
      state.loaded = this.readKeySpend(this.store, keyHash).then(
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

  /** Captured spend plus open holds of the key (tasks in progress). */
  private async readKeySpend(q: Queryable, keyHash: string): Promise<bigint> {
    const r = await q.query<{ spent: unknown; open: unknown }>(
      `SELECT (SELECT spent FROM key_spend WHERE key_hash = $1) AS spent, (SELECT COALESCE(SUM(remaining), 0) FROM holds WHERE key_hash = $1) AS open`,
      [keyHash],
    );
    return big(r.rows[0]?.spent) + big(r.rows[0]?.open);
  }

  private serial<T>(acct: AccountLease, fn: () => Promise<T>): Promise<T> {
    const run = acct.chain.then(fn, fn);
    acct.chain = run.catch(() => {});
    return run;
  }

  /**
   * Grows this replica's lease on the account so that `amount` fits: what is missing plus a
   * slice (sliceFactor x amount or twice the holds in flight, whichever is more, but at most
   * half of what the account has left, so sibling replicas are not starved). Throws InsufficientCreditsError when the account cannot cover
   * even what is missing.
   */
  private topUp(acct: AccountLease, amount: bigint): Promise<void> {
    return this.serial(acct, async () => {
      const shortfall = amount - (acct.remaining - acct.reserved);
      if (shortfall <= 0n) return;
      const r = acct.refused;
      if (r && shortfall > r.free && Date.now() - r.at < this.settings.refusalMemoryMs) throw new InsufficientCreditsError(acct.account, amount);
      const expiresAt = new Date(Date.now() + this.settings.leaseMs);
      const out = await this.store.tx(async (q) => {
        // Locks in the ledger's order, hold before account, so a concurrent commit cannot deadlock with this.
        if (acct.leaseId) await q.query('SELECT 1 FROM holds WHERE hold_id = $1 FOR UPDATE', [acct.leaseId]);
        const row = await q.query<{ free: unknown }>('SELECT balance - held AS free FROM accounts WHERE account = $1 FOR UPDATE', [acct.account]);
        const free = big(row.rows[0]?.free);
        if (free < shortfall) {
          acct.refused = { free, at: Date.now() };
          throw new InsufficientCreditsError(acct.account, amount);
        }
        // Sized to the demand: at least sliceFactor holds, and twice what is in flight now, so a
        // busy account tops up rarely instead of once every few requests.
        const inFlight = 2n * (acct.reserved + amount);
        const slice = amount * this.settings.sliceFactor > inFlight ? amount * this.settings.sliceFactor : inFlight;
        const spare = (free - shortfall) / 2n;
        const take = shortfall + (slice < spare ? slice : spare);
        if (acct.leaseId) {
          const n = acct.topups + 1;
          const grown = await extendHold(q, { holdId: acct.leaseId, operationId: `${acct.leaseId}:topup:${n}`, amount: take, expiresAt });
          if (grown !== null) return { take, leaseId: acct.leaseId, topups: n, lost: false };
        }
        const leaseId = `lease:${this.replica}:${acct.account}:${acct.generation + 1}`;
        await hold(q, { account: acct.account, holdId: leaseId, amount: take, expiresAt, purpose: 'lease', owner: this.replica });
        return { take, leaseId, topups: 0, lost: acct.leaseId !== undefined };
      });
      if (out.leaseId !== acct.leaseId) {
        // A new lease: the old one (if any) was released by the sweeper and has nothing left.
        if (out.lost) this.log.warn('billing lease was released while in use; a new one was taken', { account: acct.account });
        acct.generation++;
        acct.leaseId = out.leaseId;
        acct.remaining = 0n;
      }
      this.metrics?.topups.inc();
      acct.validUntil = expiresAt.getTime();
      acct.topups = out.topups;
      acct.remaining += out.take;
      acct.refused = undefined;
    });
  }

  /** Pushes the lease's deadline forward now (throws if the store cannot be reached); a lease the sweeper took is dropped. */
  private renew(acct: AccountLease): Promise<void> {
    return this.serial(acct, async () => {
      const leaseId = acct.leaseId;
      if (!leaseId || Date.now() <= acct.validUntil - this.settings.leaseMs / 3) return;
      const until = Date.now() + this.settings.leaseMs;
      const r = await this.store.query('UPDATE holds SET expires_at = $2 WHERE hold_id = $1 RETURNING hold_id', [leaseId, new Date(until).toISOString()]);
      if (acct.leaseId !== leaseId) return;
      if (r.rows.length > 0) acct.validUntil = until;
      else {
        acct.leaseId = undefined;
        acct.remaining = 0n;
      }
    });
  }

  /** Releases the account's lease (everything it has left goes back to the account). */
  private async handBack(acct: AccountLease): Promise<void> {
    const leaseId = acct.leaseId;
    if (!leaseId) return;
    await this.store.tx((q) => release(q, { holdId: leaseId, meta: { reason: this.closing ? 'shutdown' : 'idle' } }));
    acct.refused = undefined;
    if (acct.leaseId === leaseId) {
      acct.leaseId = undefined;
      acct.remaining = 0n;
    }
  }

  /** Keeps live leases from expiring, notices leases the sweeper took, hands back idle ones, refreshes key spend. */
  private async tick(): Promise<void> {
    const until = Date.now() + this.settings.leaseMs;
    const live = await this.store.query<{ hold_id: string }>(`UPDATE holds SET expires_at = $2 WHERE owner = $1 AND purpose = 'lease' RETURNING hold_id`, [
      this.replica,
      new Date(until).toISOString(),
    ]);
    const ids = new Set(live.rows.map((r) => r.hold_id));
    const now = Date.now();
    for (const acct of [...this.accounts.values()]) {
      if (acct.leaseId && ids.has(acct.leaseId)) acct.validUntil = Math.max(acct.validUntil, until);
      if (acct.leaseId && !ids.has(acct.leaseId) && acct.writing === 0) {
        await this.serial(acct, async () => {
          const open = await this.store.query('SELECT 1 FROM holds WHERE hold_id = $1', [acct.leaseId]);
          if (open.rows.length === 0) {
            acct.leaseId = undefined;
            acct.remaining = 0n;
          }
        });
      }
      if (acct.inflight === 0 && acct.writing === 0 && now - acct.lastUsed >= this.settings.idleMs) {
        await this.serial(acct, async () => {
          if (acct.inflight !== 0 || acct.writing !== 0) return;
          await this.handBack(acct);
          if (acct.inflight === 0 && acct.writing === 0 && !acct.leaseId) this.accounts.delete(acct.account);
        });
      }
    }
    // Spend of limited keys: forget the ones unused for a while, re-read the others (other
    // replicas and task holds move them too) in one query, while no commit of ours is pending.
    for (const [hash, k] of this.keys) {
      if (k.reserved === 0n && k.unflushed === 0n && now - k.lastUsed >= 6 * this.settings.idleMs) this.keys.delete(hash);
    }
    const idle = [...this.keys].filter(([, k]) => k.reserved === 0n && k.unflushed === 0n);
    const seen = new Map(idle.map(([hash, k]) => [hash, k.writes]));
    if (this.writers.size === 0 && this.queue.length === 0 && idle.length) {
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

  private enqueue(line: string, seg: JournalSegment | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ line, seg, resolve, reject });
      if (this.queue.length >= this.settings.maxBatch) for (const wake of this.lingering) wake();
      this.kick();
    });
  }

  /**
   * Whatever queues while a commit is written goes in the next one. A commit starts only after
   * the event loop has run its pending I/O once (setImmediate): every request whose answer is
   * already in joins it. Without that pause PGlite, which runs on this thread, would commit
   * requests one by one while holding the others back. When more requests are in flight than
   * waiting, it lingers commitLingerMs more: a commit has a fixed cost, so larger batches leave
   * more CPU for requests under load, and a lone request is not delayed. On PostgreSQL a second commit may start
   * while one is in flight (it prepares and sends its batch, then waits for the lease lock), so
   * the database's commit latency is not paid twice in a row.
   */
  private kick(): void {
    const max = this.store.kind === 'postgres' ? 2 : 1;
    if (this.writers.size >= max || this.queue.length === 0) return;
    // More requests in flight than waiting: some will settle in a moment; let them share the commit.
    // Behind a journal nobody waits for the store, so commits gather for longer.
    let linger = 0;
    if (this.journal) {
      if (!this.closing && this.queue.length < this.settings.maxBatch) linger = this.settings.journalFlushMs;
    } else if (this.inflight > this.queue.length) linger = this.settings.commitLingerMs;
    const w: Promise<void> = new Promise<void>((r) => {
      if (linger === 0) return void setImmediate(r);
      const wake = () => {
        clearTimeout(t);
        this.lingering.delete(wake);
        r();
      };
      const t = setTimeout(wake, linger);
      this.lingering.add(wake);
    })
      .then(() => this.commitNext())
      .finally(() => {
        this.writers.delete(w);
        this.kick();
      });
    this.writers.add(w);
  }

  private async commitNext(): Promise<void> {
    const batch = this.queue.splice(0, this.settings.maxBatch);
    if (batch.length === 0) return;
    try {
      await this.write(
        batch.map((b) => b.line),
        batch.every((b) => b.seg),
      );
      for (const b of batch) b.resolve();
      if (this.journal) {
        const per = new Map<JournalSegment, number>();
        for (const b of batch) if (b.seg) per.set(b.seg, (per.get(b.seg) ?? 0) + 1);
        for (const [seg, n] of per) this.journal.committed(seg, n);
      }
    } catch (err) {
      this.log.error('billing group commit failed', { captures: batch.length, error: (err as Error).message });
      for (const b of batch) b.reject(err as Error);
    }
  }

  /**
   * A failed commit is retried with the same operation ids, so a commit that did land is not
   * applied twice. Records a journal holds are retried until the store takes them (short of
   * shutdown: then they stay in the journal); the others fail their requests after four tries.
   */
  private async write(records: string[], journaled: boolean): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const end = this.metrics?.commits.startTimer();
        const { lostLeases } = await writeCommitLines(this.store, records);
        end?.();
        this.metrics?.captures.inc(records.length);
        if (lostLeases.size) this.log.warn('captures written after their lease was released', { leases: lostLeases.size });
        return;
      } catch (err) {
        if (attempt >= 3 && !(journaled && !this.closing)) throw err;
        if (attempt === 3)
          this.log.error('billing store write failing; the journal keeps the charges meanwhile', { captures: records.length, error: (err as Error).message });
        await new Promise((r) => setTimeout(r, Math.min(5000, 50 * 4 ** attempt)));
      }
    }
  }
}

/** What `tollgate serve` meters chat with. */
export function meteredBilling(
  deps: { store: Store; log: Logger; registry?: Registry; settings?: Pick<Settings, 'billing'> },
  overrides: Partial<BillingSettings> = {},
): BillingEngine {
  return new BillingEngine(deps.store, deps.log, billingSettings(deps.settings?.billing ?? {}, overrides), deps.registry);
}
