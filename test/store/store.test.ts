import { describe, expect, it } from 'vitest';
import { disposeStore, storeCases } from '../support/stores.js';
import { loadMigrations, migrate } from '../../proxy/store/migrate.js';

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
