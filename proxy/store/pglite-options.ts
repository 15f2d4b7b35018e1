import { setFlagsFromString } from 'node:v8';
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';
import { collectGarbage } from './collect.js';

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

/**
 * PGlite's PostgreSQL is compiled by V8's baseline compiler (Liftoff) alone.
 *
 * By default V8 compiles PGlite's 9 MB of WebAssembly with Liftoff and then its hot functions
 * again with TurboFan in background threads; what TurboFan allocated stays in glibc's malloc
 * arenas: 60-120 MiB of the gateway's RSS (bench/RESULTS.md "## Memory"). Liftoff code runs the
 * billing transactions at the same CPU cost within the rounds' spread (1,000-1,170 µs per ledger
 * transaction either way over 20,000, TurboFan's own compile time saved), and the quickstart's
 * chat benchmark showed no difference beyond its noise.
 *
 * The flag is V8's and process-wide, and it stays: set back after the compile, V8 tiers PGlite's
 * hot functions up all the same (RSS as without it). So other WebAssembly compiled later in a
 * process with PGlite runs Liftoff code too: undici's HTTP parser, a small part of a request
 * (an llhttp-bound load of 1-byte chunks ran 20% slower). A gateway on PostgreSQL never sets it.
 */
function baselineOnly(): void {
  setFlagsFromString('--liftoff-only');
}

/** The options every PgliteStore opens PGlite with (a folder, memory, or a dumpDataDir() image). */
export function pgliteOptions(where: { dataDir?: string; image?: Blob | File }): PGliteOptions {
  const startParams = [...PGlite.defaultStartParams, ...Object.entries(PGLITE_SETTINGS).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  return {
    ...(where.dataDir ? { dataDir: where.dataDir } : {}),
    ...(where.image ? { loadDataDir: where.image } : {}),
    startParams,
  };
}

/**
 * A new PGlite with pgliteOptions(), and one full garbage collection once it is ready.
 *
 * In memory (a data folder's cluster is made apart: initdb.ts) PGlite runs initdb in a second
 * PostgreSQL of its own (its WebAssembly memory, a copy of that memory, the initdb program and a
 * tarball of the new cluster): some 450 MB that is garbage once the database is up, but a WebAssembly memory is only
 * unmapped when V8 collects it, and an idle gateway allocates too little on the JavaScript heap for
 * V8 to collect soon (the quickstart stayed at 730-880 MB RSS on its first start). One collection
 * when PGlite is ready gives it back.
 */
export function openPglite(where: { dataDir?: string; image?: Blob | File }): PGlite {
  baselineOnly();
  const db = new PGlite(pgliteOptions(where));
  // After the task that resolved waitReady: by then #init's locals (the initdb instance) are unreachable.
  db.waitReady.then(
    () => setTimeout(collectGarbage, 0).unref(),
    () => {},
  );
  return db;
}
