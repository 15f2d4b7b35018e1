import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountState, credit, hold, verifyLedger } from '../../proxy/billing/ledger.js';
import { meteredBilling } from '../../proxy/billing/engine.js';
import { sweepExpiredHolds } from '../../proxy/billing/sweeper.js';
import type { Store } from '../../proxy/store/index.js';
import { createLogger, type Logger } from '../../kernel/log.js';
import { disposeStore, storeCases, wrapStore } from '../support/stores.js';
import { C, until } from './support.js';

/** Sweepers of several replicas at once release each expired hold exactly once, and only theirs. */
for (const sc of storeCases()) {
  describe(`the hold sweeper on ${sc.name}`, () => {
    let store: Store;
    beforeAll(async () => {
      store = await sc.open();
    });
    afterAll(() => disposeStore(store));

    it('three concurrent sweepers release 30 expired leases once each; live leases and task holds stay', async () => {
      await store.tx((q) => credit(q, { account: 'a', operationId: 'g', amount: 100n * C }));
      const past = new Date(Date.now() - 1000);
      const future = new Date(Date.now() + 60_000);
      await store.tx(async (q) => {
        for (let i = 0; i < 30; i++) await hold(q, { account: 'a', holdId: `lease:dead:${i}`, amount: C, expiresAt: past, purpose: 'lease', owner: 'dead' });
        await hold(q, { account: 'a', holdId: 'lease:alive', amount: C, expiresAt: future, purpose: 'lease', owner: 'alive' });
        await hold(q, { account: 'a', holdId: 'task:t1', amount: C, expiresAt: past, purpose: 'task' });
      });
      expect(await accountState(store, 'a')).toEqual({ balance: 100n * C, held: 32n * C });

      // Small batches so the sweepers really interleave.
      const counts = await Promise.all([sweepExpiredHolds(store, 7), sweepExpiredHolds(store, 7), sweepExpiredHolds(store, 7)]);
      let total = counts.reduce((a, b) => a + b, 0);
      while (total < 30) {
        const n = await sweepExpiredHolds(store, 7);
        expect(n).toBeGreaterThan(0);
        total += n;
      }
      expect(total).toBe(30);
      expect(await sweepExpiredHolds(store)).toBe(0);

      const releases = await store.query<{ hold_id: string; n: unknown }>("SELECT hold_id, COUNT(*) AS n FROM ledger WHERE kind = 'release' GROUP BY hold_id");
      expect(releases.rows).toHaveLength(30);
      expect(releases.rows.every((r) => Number(r.n) === 1 && r.hold_id.startsWith('lease:dead:'))).toBe(true);
      const open = await store.query<{ hold_id: string }>('SELECT hold_id FROM holds ORDER BY hold_id');
      expect(open.rows.map((r) => r.hold_id)).toEqual(['lease:alive', 'task:t1']);
      expect(await accountState(store, 'a')).toEqual({ balance: 100n * C, held: 2n * C });
      expect(await verifyLedger(store)).toEqual([]);
    });

    it("a billing engine that closes waits for its timers' work under way: nothing reaches the store once close() returns", async () => {
      // The store, except that the second sweep (the first from the timer; the first runs at start
      // and close() always waited for it) is slow to read its holds.
      let sweeps = 0;
      let closed = false;
      let late = 0;
      let timerSweep!: () => void;
      const underWay = new Promise<void>((r) => (timerSweep = r));
      const slow: Store = {
        kind: store.kind,
        query: (sql, params) => store.query(sql, params),
        tx: (fn) =>
          store.tx((q) =>
            fn({
              query: async <R>(sql: string, params?: unknown[]) => {
                if (sql.includes('expires_at < now()') && ++sweeps === 2) {
                  timerSweep();
                  await new Promise((r) => setTimeout(r, 300));
                }
                const r = await q.query<R>(sql, params);
                if (closed) late++;
                return r;
              },
            }),
          ),
        close: () => store.close(),
      };
      const engine = meteredBilling({ store: slow, log: createLogger({}, 'error') }, { sweepIntervalMs: 20 });
      await underWay;
      await engine.close();
      closed = true;
      await new Promise((r) => setTimeout(r, 400));
      // The gateway closes its store next: a sweep still running then fails and logs an error.
      expect(late).toBe(0);
      expect(sweeps).toBe(2);
    });

    it("starts no timer's work while the same timer's previous work is under way (a slow store gets no pile of queries)", async () => {
      let folds = 0;
      let release: () => void = () => {};
      const gate = new Promise<void>((r) => (release = r));
      const slow = wrapStore(store, (q) => ({
        query: async (sql, params) => {
          if (sql.includes('usage_rollup_fold')) {
            folds++;
            await gate;
          }
          return q.query(sql, params);
        },
      }));
      const engine = meteredBilling({ store: slow, log: createLogger({}, 'error') }, { rollupFoldMs: 10 });
      try {
        // Thirty ticks while the first fold waits on the store.
        await new Promise((r) => setTimeout(r, 300));
        expect(folds).toBe(1);
        release();
        await new Promise((r) => setTimeout(r, 200));
        expect(folds).toBeGreaterThan(1);
      } finally {
        release();
        await engine.close();
      }
    });

    it('logs a store outage once per timer, not once per tick, and its end', async () => {
      let down = true;
      let folds = 0;
      const flaky = wrapStore(store, (q) => ({
        query: async (sql, params) => {
          if (sql.includes('usage_rollup_fold')) {
            folds++;
            if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
          }
          return q.query(sql, params);
        },
      }));
      const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
      const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push({ level, msg, fields });
      const log: Logger = { info: at('info'), warn: at('warn'), error: at('error'), child: () => log };
      const engine = meteredBilling({ store: flaky, log }, { rollupFoldMs: 10 });
      const fold = (msg: string) => lines.filter((l) => l.msg === `billing usage rollup fold ${msg}`);
      try {
        await until(
          async () => folds,
          (n) => n >= 10,
          5_000,
          'ten failed folds',
        );
        expect(fold('failed')).toEqual([{ level: 'error', msg: 'billing usage rollup fold failed', fields: { error: 'connect ECONNREFUSED 127.0.0.1:5432' } }]);
        expect(fold('still failing')).toEqual([]);
        down = false;
        await until(
          async () => fold('recovered').length,
          (n) => n > 0,
          5_000,
          'the fold to recover',
        );
        expect(fold('recovered')[0]!.fields!.failures).toBeGreaterThanOrEqual(10);
        const after = folds;
        await until(
          async () => folds,
          (n) => n >= after + 5,
          5_000,
          'five more folds',
        );
        expect(fold('recovered')).toHaveLength(1);
        expect(fold('failed')).toHaveLength(1);
      } finally {
        await engine.close();
      }
    });

    it('an idle engine asks little: folds that find nothing space out to every eighth tick, and no lease is renewed when it holds none', async () => {
      let folds = 0;
      let renewals = 0;
      const counted = wrapStore(store, (q) => ({
        query: async (sql, params) => {
          if (sql.includes('usage_rollup_fold')) folds++;
          if (sql.includes('UPDATE holds SET expires_at')) renewals++;
          return q.query(sql, params);
        },
      }));
      // Lease upkeep every 100 ms (a third of the lease).
      const engine = meteredBilling({ store: counted, log: createLogger({}, 'error') }, { rollupFoldMs: 20, leaseMs: 300 });
      try {
        // 60 ticks of 20 ms: a fold at every tick would be 60.
        await new Promise((r) => setTimeout(r, 1200));
        expect(folds).toBeGreaterThan(2);
        expect(folds).toBeLessThanOrEqual(15);
        expect(renewals).toBe(0);
        // Another replica's usage, waiting to be folded.
        await store.query(
          `INSERT INTO usage_rollup_pending (hour, key_hash, model, key_name, account, requests, errors, input_tokens, cached_input_tokens, output_tokens, credits)
           VALUES (date_trunc('hour', now()), 'sha256:fold-test', 'm', 'k', 'a', 1, 0, 10, 0, 5, 7)`,
        );
        await until(
          async () => (await store.query<{ n: string }>('SELECT count(*) AS n FROM usage_rollup_pending')).rows[0]!.n,
          (n) => Number(n) === 0,
          2_000,
          'the pending row to be folded',
        );
        const h = await store.query<{ credits: string }>("SELECT credits FROM usage_hourly WHERE key_hash = 'sha256:fold-test'");
        expect(h.rows.map((r) => Number(r.credits))).toEqual([7]);
      } finally {
        await engine.close();
      }
    });

    it('an engine without the journal table still folds the rows a replica that used it left, the young ones once they are old', async () => {
      await store.tx((q) => credit(q, { account: 'left', operationId: 'left-grant', amount: 10n * C }));
      const line = (o: string) =>
        JSON.stringify({
          o,
          l: null,
          r: `req-${o}`,
          kn: 'k',
          kh: 'sha256:k',
          a: 'left',
          g: 'g',
          m: 'm',
          um: 'm',
          p: 'chat',
          it: 1,
          ct: 0,
          wt: 0,
          ot: 1,
          rt: 0,
          c: '5',
          us: 'reported',
          s: 'ok',
          hs: 200,
          ms: 1,
          tt: null,
        });
      await store.query("INSERT INTO billing_journal (at, lines) VALUES (now() - interval '1 hour', $1)", [`${line('left-old-1')}\n${line('left-old-2')}`]);
      await store.query('INSERT INTO billing_journal (lines) VALUES ($1)', [line('left-young')]);
      // Rows fold once older than half a lease (300 ms); sweeps every 50 ms.
      const engine = meteredBilling({ store, log: createLogger({}, 'error') }, { leaseMs: 600, sweepIntervalMs: 50 });
      try {
        await until(
          async () => (await store.query('SELECT 1 FROM billing_journal')).rows.length,
          (n) => n === 0,
          5_000,
          'every journal row to be folded',
        );
        expect(await accountState(store, 'left')).toEqual({ balance: 10n * C - 15n, held: 0n });
        const records = await store.query<{ n: unknown }>("SELECT COUNT(*) AS n FROM usage_records WHERE account = 'left'");
        expect(Number(records.rows[0]!.n)).toBe(3);
      } finally {
        await engine.close();
      }
    });
  });
}
