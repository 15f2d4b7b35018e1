import type { PGlite } from '@electric-sql/pglite';
import { Snapshotter, type CopyState } from './durable.js';
import type { DataDirLock } from './lock.js';
import { openPglite } from './pglite-options.js';
import type { Queryable, QueryResult, Store } from './types.js';

/** Embedded PostgreSQL: one connection, so transactions run one at a time (PGlite queues them). */
export class PgliteStore implements Store {
  readonly kind = 'pglite' as const;
  readonly db: PGlite;
  /** Durable copies of the data folder (durable.ts), when kept. */
  private snapshots: Snapshotter | undefined;
  /** Present while durable copies are kept: resolves once what was committed before the call is in one. */
  durable?: (urgent?: boolean) => Promise<void>;

  /** dataDir: a folder (durable) or undefined (in memory); image: a dumpDataDir() to start from. */
  constructor(
    dataDir?: string,
    image?: Blob | File,
    /** The data folder's lock (lock.ts), released when the store closes. */
    private readonly lock?: DataDirLock,
  ) {
    this.db = openPglite({ dataDir, image });
  }

  /**
   * Keeps durable copies of the data folder `dir` every intervalMs while it is written (PGlite
   * never syncs its own files). `now`: the first copy starts at once (a folder that has none),
   * without holding up the start (a thousand fsyncs on a busy disk take seconds).
   */
  keepDurable(dir: string, intervalMs: number, now: boolean, last: CopyState | undefined, onError: (err: Error) => void): void {
    const s = new Snapshotter(dir, {
      intervalMs,
      last,
      // After close() the folder is quiescent: no query can run, none needs holding back.
      exclusive: (fn) => (this.db.closed ? Promise.resolve().then(fn) : this.db.runExclusive(async () => fn())),
      onError,
    });
    this.snapshots = s;
    this.durable = (urgent) => s.durable(urgent);
    if (now) s.durable(true).catch(() => {});
  }

  /** A tarball of the whole database, to start other instances from (tests). */
  async image(): Promise<Blob | File> {
    return this.db.dumpDataDir('none');
  }

  async query<R>(sql: string, params?: unknown[]): Promise<QueryResult<R>> {
    this.snapshots?.touched();
    const r = await this.db.query<R>(sql, params as unknown[]);
    return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
  }

  async tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    this.snapshots?.touched();
    return this.db.transaction(async (t) =>
      fn({
        query: async <R>(sql: string, params?: unknown[]) => {
          const r = await t.query<R>(sql, params as unknown[]);
          return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
        },
      }),
    );
  }

  async close(): Promise<void> {
    try {
      await this.db.close();
      // The folder as the clean shutdown left it, durable: a machine crash after this loses nothing.
      await this.snapshots?.stop(true);
    } finally {
      await this.lock?.release();
    }
  }
}
