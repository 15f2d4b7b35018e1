import { mkdir } from 'node:fs/promises';
import { lockDataDir } from './lock.js';
import { migrate } from './migrate.js';
import type { Store, StoreOptions } from './types.js';

export type { Queryable, QueryResult, Store, StoreOptions } from './types.js';
export { migrate } from './migrate.js';
export { DataDirLockedError } from './lock.js';

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
    // PGlite: about 40 MB of memory once imported, and none of it needed beside PostgreSQL.
    const { PgliteStore } = await import('./pglite.js');
    // The folder is ours alone before PGlite touches it (see lock.ts).
    await mkdir(opts.dataDir, { recursive: true });
    const lock = await lockDataDir(opts.dataDir);
    try {
      store = new PgliteStore(opts.dataDir, undefined, lock);
    } catch (err) {
      await lock.release();
      throw err;
    }
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
