import { PGlite, type PGliteOptions } from '@electric-sql/pglite';

/**
 * PostgreSQL settings PGlite starts with, sized for one embedded connection in a small gateway
 * process instead of a server (bench/RESULTS.md "## Memory" measures each one).
 *
 * - shared_buffers: PostgreSQL's default (128MB) lives in PGlite's WebAssembly memory and is
 *   written through at start, so all of it counted in the process's RSS at once. 16MB holds the
 *   hot pages of the billing tables; the rest is read back from the data folder (or the in-memory
 *   file system) on a miss, which the group commits rarely take.
 * - wal_buffers: the automatic size (1/32 of shared_buffers, 512kB) instead of PGlite's 4MB.
 * - temp_buffers, maintenance_work_mem: the gateway makes no temporary tables and indexes nothing
 *   large after its migrations; smaller caps only bound what a rare statement may take.
 * - max_wal_size, min_wal_size: a single-user PostgreSQL has no checkpointer, so a checkpoint only
 *   comes when max_wal_size of WAL has been written (default 1GB); in memory (no data folder) that
 *   WAL is held in the process. 64MB keeps at most about four 16MB segments.
 */
export const PGLITE_SETTINGS: Readonly<Record<string, string>> = {
  shared_buffers: '16MB',
  wal_buffers: '-1',
  temp_buffers: '1MB',
  maintenance_work_mem: '16MB',
  min_wal_size: '32MB',
  max_wal_size: '64MB',
};

/** The options every PgliteStore opens PGlite with (a folder, memory, or a dumpDataDir() image). */
export function pgliteOptions(where: { dataDir?: string; image?: Blob | File }): PGliteOptions {
  const startParams = [...PGlite.defaultStartParams, ...Object.entries(PGLITE_SETTINGS).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  return {
    ...(where.dataDir ? { dataDir: where.dataDir } : {}),
    ...(where.image ? { loadDataDir: where.image } : {}),
    startParams,
  };
}
