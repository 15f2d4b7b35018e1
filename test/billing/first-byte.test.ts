import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable, Store } from '../../proxy/store/index.js';
import { storeCases, wrapStore } from '../support/stores.js';
import { books, C, expectExactBooks, until, wrappedStack, type WrappedStack } from './support.js';

/**
 * Admission is in memory: once a replica holds a lease on the account, nothing on the way to a
 * stream's first byte waits for the store, and only its end waits for the charge. Shown with a
 * store that answers nothing until released: the client reads its first events while the store is
 * stalled, and the stream ends only after the charge's write has gone through. A lease that runs
 * low is topped up before a request needs it, so no request meets a top-up on its way either.
 */
const KEY = 'sk-service-billing-first-byte';

/** `p`, or an error naming the statements that wait on the stalled store. */
function whileStalled<T>(p: Promise<T>, store: ReturnType<typeof stallable>): Promise<T> {
  // Not a timing: a step that waited for the store would never end while it is stalled.
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`stuck while the store is stalled; waiting there: ${JSON.stringify(store.waiting)}`)), 10_000);
  });
  // Cleared once the race is over, so that it cannot reject later, unhandled, during the next case.
  return Promise.race([p, stuck]).finally(() => clearTimeout(timer));
}

/** The store, except that while `stalled` every statement waits for release() (and is listed in `waiting`). */
function stallable(store: Store): Store & { stall(): void; release(): void; waiting: string[] } {
  let gate: Promise<void> | undefined;
  let open: () => void = () => {};
  const wrap = (q: Queryable): Queryable => ({
    query: async (sql, params) => {
      if (gate) {
        out.waiting.push(sql);
        await gate;
      }
      return q.query(sql, params);
    },
  });
  const out = Object.assign(wrapStore(store, wrap), {
    waiting: [] as string[],
    stall: () => {
      gate = new Promise<void>((r) => (open = r));
    },
    release: () => {
      gate = undefined;
      open();
    },
  });
  return out;
}

for (const sc of storeCases()) {
  describe(`a stalled store on ${sc.name}`, () => {
    let s: WrappedStack<ReturnType<typeof stallable>>;
    let store: ReturnType<typeof stallable>;
    beforeAll(async () => {
      s = await wrappedStack(sc, stallable, KEY, 100n * C);
      store = s.store;
    });
    afterAll(async () => {
      store?.release();
      await s?.dispose();
    });

    it("holds a stream's end for its charge, never its first byte", async () => {
      const client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
      // The first request takes the replica's lease on the account (a store transaction).
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'take the lease' }] });

      store.stall();
      const { events, first } = await whileStalled(
        (async () => {
          const stream = await client.chat.completions.create({
            model: 'm',
            stream: true,
            messages: [{ role: 'user', content: 'stream while the store is stalled' }],
          });
          const events = stream[Symbol.asyncIterator]();
          return { events, first: await events.next() };
        })(),
        store,
      );
      expect(first.done).toBe(false);
      expect(first.value!.object).toBe('chat.completion.chunk');

      let ended = false;
      const rest = (async () => {
        const chunks = [];
        for (let r = await events.next(); !r.done; r = await events.next()) chunks.push(r.value);
        ended = true;
        return chunks;
      })();
      // The answer is whole upstream: its charge's write now waits for the store, and so does its end.
      await until(
        async () => store.waiting.filter((sql) => sql.includes('billing_commit')).length,
        (n) => n > 0,
        10_000,
        'the charge to reach the store',
      );
      expect(ended).toBe(false);

      store.release();
      const chunks = await rest;
      expect(chunks.length).toBeGreaterThan(0);
      await s.close();
      const after = await books(store, 'acct');
      expect(after.usageRecords).toBe(2);
      expectExactBooks(after);
    }, 30_000);
  });
}

for (const sc of storeCases()) {
  describe(`a lease running low on ${sc.name}`, () => {
    let s: WrappedStack<ReturnType<typeof stallable>>;
    let store: ReturnType<typeof stallable>;
    beforeAll(async () => {
      // A lease of five holds (the first request's, plus a slice of four): a top-up ahead of need
      // starts once fewer than two are free.
      s = await wrappedStack(sc, stallable, KEY, 100n * C, { sliceFactor: 4n });
      store = s.store;
    });
    afterAll(async () => {
      store?.release();
      await s?.dispose();
    });

    it('is topped up before a request needs it, so requests are admitted while the store is stalled', async () => {
      const client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'take the lease' }] });
      const topups = async () =>
        Number((await store.query<{ n: unknown }>(`SELECT count(*) AS n FROM ledger WHERE kind = 'hold' AND operation_id LIKE '%:topup:%'`)).rows[0]!.n);
      expect(await topups()).toBe(0);

      // Streams the upstream holds open keep their holds: three of the lease's five.
      const holding = new AbortController();
      const held = (i: number) =>
        client.chat.completions.create(
          { model: 'm', stream: true, messages: [{ role: 'user', content: `held ${i} [sim:pause=60000]` }] },
          { signal: holding.signal },
        );
      const open = [await held(1), await held(2), await held(3)];
      await until(topups, (n) => n === 1, 10_000, 'a top-up ahead of need');

      // Two more: without the top-up ahead, the second would wait on the stalled store for one.
      store.stall();
      open.push(await whileStalled(held(4), store), await whileStalled(held(5), store));

      store.release();
      holding.abort();
      await Promise.allSettled(
        open.map(async (stream) => {
          for await (const _ of stream);
        }),
      );
      // The first request took the lease on its own path; nothing else did.
      const metrics = await (await fetch(`${s.gw.adminUrl}/metrics`)).text();
      expect(metrics).toContain('tollgate_billing_lease_topups_total{when="on_request"} 1');
      expect(metrics).toContain('tollgate_billing_lease_topups_total{when="ahead"} 1');
      await s.close();
      const after = await books(store, 'acct');
      expect(after.usageRecords).toBe(6);
      expectExactBooks(after);
    }, 30_000);
  });
}
