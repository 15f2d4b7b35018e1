import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { disposeStore, storeCases } from '../support/stores.js';
import { loadMigrations, migrate } from '../../proxy/store/migrate.js';
import { openStore } from '../../proxy/store/index.js';

for (const c of storeCases({ thread: true })) {
  describe(`store on ${c.name}`, () => {
    it('applies every migration once, even when two starts race', async () => {
      const store = await c.open();
      try {
        const all = loadMigrations().map((m) => m.version);
        const again = await Promise.all([migrate(store), migrate(store)]);
        expect(again).toEqual([[], []]);
        const r = await store.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
        expect(r.rows.map((x) => x.version)).toEqual(all);
      } finally {
        await disposeStore(store);
      }
    });

    it('rolls a failed transaction back and round-trips BIGINT beyond 2^53', async () => {
      const store = await c.open();
      try {
        await store.query('CREATE TABLE t (id INT PRIMARY KEY, v BIGINT NOT NULL)');
        await expect(
          store.tx(async (q) => {
            await q.query('INSERT INTO t VALUES (1, 1)');
            await q.query('INSERT INTO t VALUES (1, 2)'); // duplicate key
          }),
        ).rejects.toThrow(/duplicate key/);
        expect((await store.query('SELECT * FROM t')).rows).toEqual([]);
        await store.query('INSERT INTO t VALUES (2, $1)', ['9007199254740993']);
        const r = await store.query<{ v: string | bigint }>('SELECT v FROM t');
        expect(BigInt(r.rows[0]!.v)).toBe(9007199254740993n);
      } finally {
        await disposeStore(store);
      }
    });
  });
}

describe.runIf(process.env.DATABASE_URL)('named statements on PostgreSQL', () => {
  it('parses a statement once per connection, and one a pooler lost runs anyway, unnamed from then on', async () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    // One connection, so the session the statement was prepared on is the one asked.
    const store = await openStore({ databaseUrl: process.env.DATABASE_URL!, schema, poolSize: 1 });
    const prepared = async () => (await store.query<{ name: string }>('SELECT name FROM pg_prepared_statements')).rows.map((r) => r.name);
    try {
      expect((await store.query<{ v: number }>('SELECT $1::int + 1 AS v', [1], { prepare: 'plus_one' })).rows).toEqual([{ v: 2 }]);
      expect((await store.query<{ v: number }>('SELECT $1::int + 1 AS v', [2], { prepare: 'plus_one' })).rows).toEqual([{ v: 3 }]);
      // Named by the caller and the text (two releases' versions of a statement never share a name).
      expect(await prepared()).toEqual([expect.stringMatching(/^plus_one_[0-9a-f]{12}$/)]);
      const name = (await prepared())[0]!;
      // What a pooler in transaction mode does: the next statement lands on a session without it.
      await store.query(`DEALLOCATE ${name}`);
      expect((await store.query<{ v: number }>('SELECT $1::int + 1 AS v', [3], { prepare: 'plus_one' })).rows).toEqual([{ v: 4 }]);
      expect((await store.query<{ v: number }>('SELECT $1::int + 1 AS v', [4], { prepare: 'plus_one' })).rows).toEqual([{ v: 5 }]);
      expect(await prepared()).toEqual([]);
    } finally {
      await store.query(`DROP SCHEMA "${schema}" CASCADE`);
      await store.close();
    }
  });
});
