import { mkdir } from 'node:fs/promises';
import { lockDataDir } from './lock.js';
import { migrate } from './migrate.js';
import type { PgliteStore } from './pglite.js';
import type { Store, StoreOptions } from './types.js';

export type { Queryable, QueryOptions, QueryResult, Store, StoreOptions } from './types.js';
export { migrate } from './migrate.js';
export { DataDirLockedError } from './lock.js';

/** How often PGlite on a folder is copied durably while it is written, unless told otherwise. */
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 5000;
/** How often PGlite is vacuumed while it is written (PostgreSQL's autovacuum_naptime). */
export const DEFAULT_VACUUM_INTERVAL_MS = 60_000;

/** Opens PostgreSQL when a URL is given, else PGlite (in a folder or in memory), and migrates it. */
export async function openStore(opts: StoreOptions): Promise<Store> {
  let store: Store;
  let pglite: PgliteStore | undefined;
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
    pglite = store = new PgliteStore();
  }
  try {
    await migrate(store);
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
  pglite?.vacuumEvery(opts.vacuumIntervalMs ?? DEFAULT_VACUUM_INTERVAL_MS, opts.log);
  return store;
}

/**
 * PGlite on a folder, locked to this process first (lock.ts), opened by folder.ts: in a worker
 * thread of its own (pglite-thread.ts) unless `thread: false`.
 */
async function openDataDir(dir: string, opts: StoreOptions): Promise<Store> {
  const snapshotIntervalMs = opts.snapshotIntervalMs ?? DEFAULT_SNAPSHOT_INTERVAL_MS;
  const vacuumIntervalMs = opts.vacuumIntervalMs ?? DEFAULT_VACUUM_INTERVAL_MS;
  await mkdir(dir, { recursive: true });
  const lock = await lockDataDir(dir);
  try {
    if (opts.thread === false) {
      // PGlite: about 40 MB of memory once imported, and none of it needed beside PostgreSQL.
      const { openFolder } = await import('./folder.js');
      return await openFolder(dir, { ...opts, snapshotIntervalMs, vacuumIntervalMs }, lock);
    }
    const { PgliteThreadStore } = await import('./pglite-thread.js');
    return await PgliteThreadStore.open(
      dir,
      { snapshotIntervalMs, vacuumIntervalMs, ...(opts.log ? { log: opts.log } : {}), ...(opts.onLost ? { onLost: opts.onLost } : {}) },
      lock,
    );
  } catch (err) {
    await lock.release();
    throw err;
  }
}
