import { mkdir } from 'node:fs/promises';
import { latestSnapshot, markLiveDir, prepareLiveDir } from './durable.js';
import { lockDataDir, type DataDirLock } from './lock.js';
import { initdbApart } from './initdb.js';
import { migrate } from './migrate.js';
import type { PgliteStore } from './pglite.js';
import type { Store, StoreOptions } from './types.js';

export type { Queryable, QueryResult, Store, StoreOptions } from './types.js';
export { migrate } from './migrate.js';
export { DataDirLockedError } from './lock.js';

/** How often PGlite on a folder is copied durably while it is written, unless told otherwise. */
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 5000;

/** Opens PostgreSQL when a URL is given, else PGlite (in a folder or in memory), and migrates it. */
export async function openStore(opts: StoreOptions): Promise<Store> {
  let store: Store;
  if (opts.databaseUrl) {
    // Each store's driver loads only when it is the one opened (node-postgres here, PGlite below).
    const { PostgresStore } = await import('./postgres.js');
    if (opts.schema) {
      const admin = new PostgresStore(opts.databaseUrl, { poolSize: 1 });
      await admin.query(`CREATE SCHEMA IF NOT EXISTS "${opts.schema}"`).finally(() => admin.close());
    }
    store = new PostgresStore(opts.databaseUrl, { schema: opts.schema, poolSize: opts.poolSize });
  } else if (opts.dataDir) {
    return openDataDir(opts.dataDir, opts);
  } else {
    const { PgliteStore } = await import('./pglite.js');
    store = new PgliteStore();
  }
  try {
    await migrate(store);
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
  return store;
}

/**
 * PGlite on a folder. The folder is ours alone before PGlite touches it (lock.ts). After a
 * machine crash its last durable copy replaces it (durable.ts); a folder that does not open is
 * replaced by that copy too. Durable copies are then kept every few seconds.
 */
async function openDataDir(dir: string, opts: StoreOptions): Promise<Store> {
  const interval = opts.snapshotIntervalMs ?? DEFAULT_SNAPSHOT_INTERVAL_MS;
  await mkdir(dir, { recursive: true });
  const lock = await lockDataDir(dir);
  try {
    let { state, last } = interval > 0 ? prepareLiveDir(dir) : { state: 'live' as const, last: undefined };
    let store: PgliteStore;
    try {
      store = await openPglite(dir, lock);
    } catch (err) {
      if (state !== 'live' || interval === 0 || latestSnapshot(dir) === undefined) throw err;
      opts.log?.error('the data folder does not open; restoring its last durable copy', { dir, error: (err as Error).message });
      ({ state, last } = prepareLiveDir(dir, true));
      store = await openPglite(dir, lock);
    }
    if (state === 'restored') opts.log?.info('data folder restored from its last durable copy (the machine crashed since it was written)', { dir });
    if (interval > 0) {
      markLiveDir(dir);
      // A folder without a durable copy gets one at once.
      try {
        store.keepDurable(dir, interval, latestSnapshot(dir) === undefined, last, (err) =>
          opts.log?.error('durable copy of the data folder failed', { dir, error: err.message }),
        );
      } catch (err) {
        await store.close().catch(() => {});
        throw err;
      }
    }
    return store;
  } catch (err) {
    await lock.release();
    throw err;
  }
}

/** Opens and migrates; on failure closes PGlite without giving the lock back. */
async function openPglite(dir: string, lock: DataDirLock): Promise<PgliteStore> {
  // PGlite: about 40 MB of memory once imported, and none of it needed beside PostgreSQL.
  const { PgliteStore } = await import('./pglite.js');
  await initdbApart(dir);
  const store = new PgliteStore(dir, undefined, lock);
  try {
    await migrate(store);
    return store;
  } catch (err) {
    await store.db.close().catch(() => {});
    throw err;
  }
}
