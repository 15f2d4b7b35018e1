import { latestSnapshot, markLiveDir, prepareLiveDir } from './durable.js';
import { initdbApart } from './initdb.js';
import type { DataDirLock } from './lock.js';
import { migrate } from './migrate.js';
import { PgliteStore } from './pglite.js';
import type { StoreOptions } from './types.js';

/**
 * PGlite on a folder the caller has locked (lock.ts). After a machine crash its last durable copy
 * replaces it (durable.ts); a folder that does not open is replaced by that copy too. Durable
 * copies are then kept every few seconds. `lock`, when given, is released by the store's close();
 * without it the caller releases its own (the store runs in a worker thread: pglite-thread.ts).
 */
export async function openFolder(
  dir: string,
  opts: StoreOptions & { snapshotIntervalMs: number; vacuumIntervalMs: number },
  lock?: DataDirLock,
): Promise<PgliteStore> {
  const interval = opts.snapshotIntervalMs;
  let { state, last } = interval > 0 ? prepareLiveDir(dir) : { state: 'live' as const, last: undefined };
  let store: PgliteStore;
  try {
    store = await openMigrated(dir, lock);
  } catch (err) {
    if (state !== 'live' || interval === 0 || latestSnapshot(dir) === undefined) throw err;
    opts.log?.error('the data folder does not open; restoring its last durable copy', { dir, error: (err as Error).message });
    ({ state, last } = prepareLiveDir(dir, true));
    store = await openMigrated(dir, lock);
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
      await store.db.close().catch(() => {});
      throw err;
    }
  }
  // Last: a failure above closes PGlite directly, and would leave the timer behind.
  store.vacuumEvery(opts.vacuumIntervalMs, opts.log);
  return store;
}

/** Opens and migrates; on failure closes PGlite without giving the lock back. */
async function openMigrated(dir: string, lock: DataDirLock | undefined): Promise<PgliteStore> {
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
