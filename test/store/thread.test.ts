import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DataDirLockedError, openStore, type Store } from '../../proxy/store/index.js';
import { StoreThreadError } from '../../proxy/store/pglite-thread.js';
import { disposeStore, folderOf, openPgliteThread } from '../support/stores.js';

/**
 * PGlite on a data folder runs in a worker thread (proxy/store/pglite-thread.ts). What the gateway
 * relies on must survive the thread boundary: PostgreSQL's error fields, one transaction at a
 * time, the folder's lock, and a clear failure instead of a hang when the thread is gone.
 */
describe('PGlite in its worker thread', () => {
  const roots: string[] = [];
  afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

  // Its store is the file's first to start in a thread: 11 s on Node 20 and over 30 s on Node 24
  // in one CI run on a slow machine.
  it("passes PostgreSQL's error fields through, and rolls back a transaction whose statement failed", async () => {
    const store = await openPgliteThread();
    try {
      await store.query('CREATE TABLE t (id INT CONSTRAINT t_pk PRIMARY KEY, v BIGINT NOT NULL)');
      const err = (await store
        .tx(async (q) => {
          await q.query('INSERT INTO t VALUES (1, 1)');
          await q.query('INSERT INTO t VALUES (1, 2)');
        })
        .catch((e: unknown) => e)) as Error & Record<string, unknown>;
      expect(err.message).toMatch(/duplicate key value violates unique constraint "t_pk"/);
      expect(err.code).toBe('23505');
      expect(err.constraint).toBe('t_pk');
      expect((await store.query('SELECT count(*)::int AS n FROM t')).rows).toEqual([{ n: 0 }]);
      // A throw of the caller's own rolls back too, and the error is the caller's object.
      class Mine extends Error {}
      const mine = new Mine('stop');
      await expect(
        store.tx(async (q) => {
          await q.query('INSERT INTO t VALUES (2, 2)');
          throw mine;
        }),
      ).rejects.toBe(mine);
      expect((await store.query('SELECT count(*)::int AS n FROM t')).rows).toEqual([{ n: 0 }]);
    } finally {
      await disposeStore(store);
    }
  }, 60_000);

  it('runs one transaction at a time: concurrent read-modify-write transactions lose no update', async () => {
    const store = await openPgliteThread();
    try {
      await store.query('CREATE TABLE c (id INT PRIMARY KEY, n BIGINT NOT NULL)');
      await store.query('INSERT INTO c VALUES (1, 0)');
      await Promise.all(
        Array.from({ length: 40 }, () =>
          store.tx(async (q) => {
            const { rows } = await q.query<{ n: unknown }>('SELECT n FROM c WHERE id = 1');
            await new Promise((r) => setTimeout(r, 1));
            await q.query('UPDATE c SET n = $1 WHERE id = 1', [String(BigInt(rows[0]!.n as string | bigint) + 1n)]);
          }),
        ),
      );
      const { rows } = await store.query<{ n: unknown }>('SELECT n FROM c WHERE id = 1');
      expect(BigInt(rows[0]!.n as string | bigint)).toBe(40n);
    } finally {
      await disposeStore(store);
    }
  });

  it('holds the data folder until closed, and the folder reopens with its data', async () => {
    const root = mkdtempSync(join(tmpdir(), 'tollgate-thread-'));
    roots.push(root);
    const dir = join(root, 'pg');
    const lostOnClose: Error[] = [];
    const first = await openStore({ dataDir: dir, snapshotIntervalMs: 0, onLost: (err) => lostOnClose.push(err) });
    await first.query("INSERT INTO accounts (account, balance, held) VALUES ('kept', 7, 0)");
    await expect(openStore({ dataDir: dir, snapshotIntervalMs: 0 })).rejects.toBeInstanceOf(DataDirLockedError);
    await first.close();
    // A close is not a loss.
    expect(lostOnClose).toEqual([]);
    const again = await openStore({ dataDir: dir, snapshotIntervalMs: 0 });
    try {
      const { rows } = await again.query<{ balance: unknown }>("SELECT balance FROM accounts WHERE account = 'kept'");
      expect(BigInt(rows[0]!.balance as bigint)).toBe(7n);
    } finally {
      await again.close();
    }
  }, 60_000);

  it('tells its owner once and fails every call, pending or new, when the thread is gone, and still gives the folder back on close', async () => {
    const lost: Error[] = [];
    const store: Store = await openPgliteThread({ onLost: (err) => lost.push(err) });
    const worker = (store as unknown as { worker: { terminate(): Promise<number> } }).worker;
    const pending = store.query('SELECT pg_sleep(0.5)');
    await worker.terminate();
    await expect(pending).rejects.toBeInstanceOf(StoreThreadError);
    expect(lost.map((e) => e.message)).toEqual([expect.stringMatching(/store thread exited/)]);
    await expect(store.query('SELECT 1')).rejects.toThrow(/store thread exited/);
    await store.close();
    const again = await openStore({ dataDir: folderOf(store), snapshotIntervalMs: 0 });
    expect((await again.query('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    await again.close();
    await disposeStore(store);
  });
});
