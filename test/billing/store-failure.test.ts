import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSegment } from '../../proxy/billing/journal.js';
import type { BillingSettings } from '../../proxy/billing/settings.js';
import type { Queryable, Store } from '../../proxy/store/index.js';
import { storeCases, wrapStore } from '../support/stores.js';
import { books, C, expectExactBooks, until, wrappedStack, type WrappedStack } from './support.js';

/**
 * "Charged, or not answered": when the group commit cannot be written, the client does not get
 * its answer (a 500 instead of the completion), nothing is charged, and once the store is back
 * the next request is served and charged as usual. With a billing journal the charge is durable
 * before the store write, so the answer goes out and the store takes the charge when it is back;
 * so with the journal table on PostgreSQL, where only billing_commit() fails.
 */
const KEY = 'sk-service-billing-store-failure';

/**
 * The store, except that group commits fail while `failing` is set (and the journal table's
 * inserts too while `journalFailing` is), and every query while `down` is.
 */
function flaky(store: Store): Store & { failing: boolean; journalFailing: boolean; down: boolean } {
  const wrap = (q: Queryable): Queryable => ({
    query: (sql, params, opts) => {
      if (out.down || (out.failing && (sql.includes('billing_commit') || (out.journalFailing && sql.includes('INSERT INTO billing_journal')))))
        return Promise.reject(new Error('simulated store outage'));
      return q.query(sql, params, opts);
    },
  });
  const out = Object.assign(wrapStore(store, wrap), { failing: false, journalFailing: false, down: false });
  return out;
}

for (const sc of storeCases()) {
  /** Where the answer waits for its charge to be durable: the books' commit, or PostgreSQL's default, the journal table's insert. */
  const durablePoints: { what: string; settings: Partial<BillingSettings> }[] = [{ what: 'committed on the path', settings: { journalTable: false } }];
  if (sc.name === 'postgres') durablePoints.push({ what: "in the journal table (PostgreSQL's default)", settings: {} });
  for (const point of durablePoints)
    describe(`a store outage at settlement, ${point.what}, on ${sc.name}`, () => {
      let s: WrappedStack<ReturnType<typeof flaky>>;
      let store: ReturnType<typeof flaky>;
      beforeAll(async () => {
        s = await wrappedStack(sc, flaky, KEY, 10n * C, point.settings);
        store = s.store;
        store.journalFailing = true;
      });
      afterAll(() => s?.dispose());

      it('the client gets a 500 instead of an answer it was not charged for; afterwards billing resumes', async () => {
        const client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
        const before = await books(store, 'acct');
        store.failing = true;
        await expect(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'during the outage' }] })).rejects.toMatchObject({
          status: 500,
        });
        store.failing = false;
        const during = await books(store, 'acct');
        expect(during.balance).toBe(before.balance);
        expect(during.usageRecords).toBe(0);

        const ok = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'after the outage' }] });
        expect(ok.usage!.total_tokens).toBeGreaterThan(0);
        await s.close();
        const after = await books(store, 'acct');
        expect(after.usageRecords).toBe(1);
        expect(after.usageCredits).toBe(BigInt(ok.usage!.prompt_tokens + 2 * ok.usage!.completion_tokens));
        expectExactBooks(after);
      }, 30_000);
    });

  /**
   * Where charges wait for the store: a directory's segment files (and its LOCK until shutdown), or
   * the journal table's rows (PostgreSQL only). `lines`: the charges it holds; `left`: its files or rows.
   */
  const journals: {
    what: string;
    settings: (dir: string) => Partial<BillingSettings>;
    lines: (store: Queryable, dir: string) => Promise<string[]>;
    left: (store: Queryable, dir: string) => Promise<number>;
  }[] = [
    {
      what: 'a billing journal',
      settings: (dir) => ({ journalDir: dir }),
      lines: async (_store, dir) =>
        (
          await Promise.all((await readdir(dir)).filter((f) => f.endsWith('.jsonl')).map(async (f) => parseSegment(await readFile(join(dir, f), 'utf8'))))
        ).flat(),
      left: async (_store, dir) => (await readdir(dir)).length,
    },
  ];
  if (sc.name === 'postgres')
    journals.push({
      what: 'the billing journal table',
      settings: () => ({ journalTable: true }),
      lines: async (store) => (await store.query<{ lines: string }>('SELECT lines FROM billing_journal')).rows.flatMap((r) => r.lines.split('\n')),
      left: async (store) => Number((await store.query<{ n: unknown }>('SELECT COUNT(*) AS n FROM billing_journal')).rows[0]!.n),
    });

  for (const j of journals)
    describe(`a store outage with ${j.what} on ${sc.name}`, () => {
      let s: WrappedStack<ReturnType<typeof flaky>>;
      let store: ReturnType<typeof flaky>;
      let dir: string;
      beforeAll(async () => {
        dir = await mkdtemp(join(tmpdir(), 'tollgate-outage-journal-'));
        s = await wrappedStack(sc, flaky, KEY, 10n * C, {
          ...j.settings(dir),
          journalFlushMs: 5,
          // Renewed every 300 ms; after 600 ms without a renewal the lease admits nothing.
          leaseMs: 900,
        });
        store = s.store;
      });
      afterAll(async () => {
        await s?.dispose();
        if (dir) await rm(dir, { recursive: true, force: true });
      });

      it('answers while group commits fail, and charges each answer once the store is back', async () => {
        const client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
        const first = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'takes the lease' }] });
        await until(
          () => books(store, 'acct'),
          (b) => b.usageRecords === 1,
          10_000,
          'the first charge',
        );
        store.failing = true;
        const during = await Promise.all(
          [1, 2, 3].map((i) => client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `during the outage ${i}` }] })),
        );
        expect((await books(store, 'acct')).usageRecords).toBe(1);
        // The three answers' charges are durable in the journal, and in the journal only.
        const booked = new Set((await store.query<{ operation_id: string }>('SELECT operation_id FROM usage_records')).rows.map((r) => r.operation_id));
        const waiting = (await j.lines(store, dir)).filter((l) => !booked.has((JSON.parse(l) as { o: string }).o));
        expect(waiting).toHaveLength(3);
        const pending = async () => /^tollgate_billing_journal_pending (\d+)$/m.exec(await (await fetch(`${s.gw.adminUrl}/metrics`)).text())?.[1];
        expect(await pending()).toBe('3');
        store.failing = false;
        const after = await until(
          () => books(store, 'acct'),
          (b) => b.usageRecords === 4,
          15_000,
          'the journaled charges to reach the store',
        );
        const cost = (r: OpenAI.ChatCompletion) => BigInt(r.usage!.prompt_tokens + 2 * r.usage!.completion_tokens);
        expect(after.usageCredits).toBe(during.reduce((n, r) => n + cost(r), cost(first)));
        expect(await pending()).toBe('0');
      }, 30_000);

      it('stops admitting against a lease it cannot renew (another replica may sweep it), and admits again once the store is back', async () => {
        const client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
        const before = await books(store, 'acct');
        store.down = true;
        await new Promise((r) => setTimeout(r, 1000));
        await expect(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'lease past renewal' }] })).rejects.toMatchObject({
          status: 500,
        });
        store.down = false;
        const ok = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'store back' }] });
        const after = await until(
          () => books(store, 'acct'),
          (b) => b.usageRecords === before.usageRecords + 1,
          15_000,
          'the charge after the outage',
        );
        expect(after.usageCredits - before.usageCredits).toBe(BigInt(ok.usage!.prompt_tokens + 2 * ok.usage!.completion_tokens));
        await s.close();
        expectExactBooks(await books(store, 'acct'));
        expect(await j.left(store, dir)).toBe(0);
      }, 30_000);
    });
}
