import { PGlite } from '@electric-sql/pglite';
import type { DataDirLock } from './lock.js';
import { openPglite } from './pglite-options.js';
import type { Queryable, QueryResult, Store } from './types.js';

/** Embedded PostgreSQL: one connection, so transactions run one at a time (PGlite queues them). */
export class PgliteStore implements Store {
  readonly kind = 'pglite' as const;
  readonly db: PGlite;

  /** dataDir: a folder (durable) or undefined (in memory); image: a dumpDataDir() to start from. */
  constructor(
    dataDir?: string,
    image?: Blob | File,
    /** The data folder's lock (lock.ts), released when the store closes. */
    private readonly lock?: DataDirLock,
  ) {
    this.db = openPglite({ dataDir, image });
  }

  /** A tarball of the whole database, to start other instances from (tests). */
  async image(): Promise<Blob | File> {
    return this.db.dumpDataDir('none');
  }

  async query<R>(sql: string, params?: unknown[]): Promise<QueryResult<R>> {
    const r = await this.db.query<R>(sql, params as unknown[]);
    return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
  }

  async tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
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
    } finally {
      await this.lock?.release();
    }
  }
}
