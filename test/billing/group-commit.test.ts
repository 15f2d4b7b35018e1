import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../proxy/store/index.js';
import { storeCases, wrapStore } from '../support/stores.js';
import { books, C, expectExactBooks, until, wrappedStack, type WrappedStack } from './support.js';

/**
 * Group commits, one at a time on either store: what settles while a commit is written goes in
 * the next one. A second commit overlapping the first (as on PostgreSQL until 2026-11-28) split
 * the queue into smaller batches, each waiting for the other's row locks.
 */
const KEY = 'sk-service-billing-group-commit';
/** How long the first commit is held: the other requests settle meanwhile, even on a busy machine. */
const FIRST_COMMIT_MS = 1500;

/** The store, with its first group commit held FIRST_COMMIT_MS before it is written; records every commit's size and how many were in flight. */
function slowCommits(store: Store): Store & { commits: { size: number; overlapping: number }[] } {
  let inFlight = 0;
  const commits: { size: number; overlapping: number }[] = [];
  const out = wrapStore(store, (q) => ({
    query: async (sql, params) => {
      if (!sql.includes('billing_commit')) return q.query(sql, params);
      inFlight++;
      commits.push({ size: (JSON.parse(String(params![0])) as unknown[]).length, overlapping: inFlight });
      try {
        if (commits.length === 1) await new Promise((r) => setTimeout(r, FIRST_COMMIT_MS));
        return await q.query(sql, params);
      } finally {
        inFlight--;
      }
    },
  }));
  return Object.assign(out, { commits });
}

for (const sc of storeCases()) {
  describe(`group commits on ${sc.name}`, () => {
    let s: WrappedStack<ReturnType<typeof slowCommits>>;
    let store: ReturnType<typeof slowCommits>;
    beforeAll(async () => {
      // Committed on the requests' path, where each answer waits for its commit (PostgreSQL's
      // default, the journal table, gathers commits behind the answers instead).
      s = await wrappedStack(sc, slowCommits, KEY, 100n * C, { journalTable: false });
      store = s.store;
    });
    afterAll(() => s?.dispose());

    it('writes one commit at a time, and every request that settled while one was written goes in the next', async () => {
      const client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
      const ask = (i: number) => client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `request ${i}` }] });
      // One request first, alone: its commit starts at once, and 24 more settle while it is held.
      const first = ask(0);
      await until(
        async () => store.commits.length,
        (n) => n > 0,
        10_000,
        'the first commit',
      );
      const answers = await Promise.all([first, ...Array.from({ length: 24 }, (_, i) => ask(i + 1))]);
      expect(answers.every((a) => a.choices[0]!.message.content)).toBe(true);

      expect(store.commits.map((c) => c.overlapping)).toEqual(store.commits.map(() => 1));
      // The lone request's commit, then one for the 24: all of them settled while the first was held.
      expect(store.commits[0]!.size).toBe(1);
      expect(store.commits.slice(1).map((c) => c.size)).toEqual([24]);

      await s.close();
      const b = await books(store, 'acct');
      expect(b.usageRecords).toBe(25);
      expectExactBooks(b);
    }, 30_000);
  });
}
