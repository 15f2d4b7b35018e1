import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../store/index.js';
import type { CommitRecord } from './commit.js';
import { credit } from './ledger.js';
import { foldJournalTable, TableJournal } from './table-journal.js';

const record = (o: string): string =>
  JSON.stringify({
    o,
    l: null,
    r: `req-${o}`,
    kn: 'key',
    kh: 'sha256:k',
    a: 'acct',
    g: 'g',
    m: 'm',
    um: 'u',
    p: 'messages',
    it: 3,
    ct: 0,
    wt: 0,
    ot: 4,
    rt: 0,
    c: '10',
    us: 'reported',
    s: 'ok',
    hs: 200,
    ms: 5,
    tt: null,
  } satisfies CommitRecord);

it('refuses PGlite, whose commits are durable only in its copies', async () => {
  const store = await openStore({});
  try {
    expect(() => new TableJournal(store)).toThrow(/needs PostgreSQL/);
  } finally {
    await store.close();
  }
});

describe.skipIf(!process.env.DATABASE_URL)('the billing journal table on PostgreSQL', () => {
  let store: Store;
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const rows = async () => (await store.query<{ id: unknown; lines: string }>('SELECT id, lines FROM billing_journal ORDER BY id')).rows;
  const usage = async () => Number((await store.query<{ n: unknown }>('SELECT COUNT(*) AS n FROM usage_records')).rows[0]!.n);
  beforeAll(async () => {
    store = await openStore({ databaseUrl: process.env.DATABASE_URL, schema });
    await credit(store, { account: 'acct', operationId: 'grant', amount: 1_000_000n });
  });
  afterAll(async () => {
    await store?.query(`DROP SCHEMA "${schema}" CASCADE`);
    await store?.close();
  });

  it('writes the records that settle together in one row, and deletes it once the store has every line', async () => {
    const j = new TableJournal(store);
    const lines = Array.from({ length: 10 }, (_, i) => record(`together-${i}`));
    const segs = await Promise.all(lines.map((l) => j.append(l)));
    expect(new Set(segs).size).toBe(1);
    expect((await rows()).map((r) => r.lines.split('\n'))).toEqual([lines]);

    j.committed(segs[0]!, 4);
    await j.close();
    expect(await rows()).toHaveLength(1);
    const k = new TableJournal(store);
    k.committed(segs[0]!, 6);
    await k.close();
    expect(await rows()).toEqual([]);
  });

  it('folds rows older than asked into the books once, and leaves younger ones', async () => {
    const j = new TableJournal(store);
    await j.append(record('left-1'), true);
    await j.append(record('left-2'), true);
    await j.close();
    expect(await rows()).toHaveLength(2);
    const before = await usage();

    expect(await foldJournalTable(store, 60_000)).toBe(0);
    expect(await rows()).toHaveLength(2);
    expect(await foldJournalTable(store, 0)).toBe(2);
    expect(await rows()).toEqual([]);
    expect(await usage()).toBe(before + 2);

    // A row whose lines are in the books already (its replica died between the commit and the delete) charges nothing again.
    await store.query('INSERT INTO billing_journal (lines) VALUES ($1)', [record('left-1')]);
    const balance = async () =>
      BigInt(String((await store.query<{ balance: unknown }>("SELECT balance FROM accounts WHERE account = 'acct'")).rows[0]!.balance));
    const was = await balance();
    expect(await foldJournalTable(store, 0)).toBe(1);
    expect(await balance()).toBe(was);
    expect(await usage()).toBe(before + 2);
    expect(await rows()).toEqual([]);
  });
});
