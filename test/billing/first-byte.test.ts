import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable, Store } from '../../proxy/store/index.js';
import { storeCases, wrapStore } from '../support/stores.js';
import { books, C, expectExactBooks, until, wrappedStack, type WrappedStack } from './support.js';

/**
 * Admission is in memory: once a replica holds a lease on the account, nothing on the way to a
 * stream's first byte waits for the store, and only its end waits for the charge. Shown with a
 * store that answers nothing until released: the client reads its first events while the store is
 * stalled, and the stream ends only after the charge's write has gone through.
 */
const KEY = 'sk-service-billing-first-byte';

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
      const opened = (async () => {
        const stream = await client.chat.completions.create({
          model: 'm',
          stream: true,
          messages: [{ role: 'user', content: 'stream while the store is stalled' }],
        });
        const events = stream[Symbol.asyncIterator]();
        return { events, first: await events.next() };
      })();
      // Not a timing: a first byte that waited for the store would never come while it is stalled.
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no first event while the store is stalled; waiting there: ${JSON.stringify(store.waiting)}`)), 10_000);
      });
      // Cleared once the race is over, so that it cannot reject later, unhandled, during the next case.
      const { events, first } = await Promise.race([opened, stuck]).finally(() => clearTimeout(timer));
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
