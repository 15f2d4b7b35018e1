import type { PGlite } from '@electric-sql/pglite';
import { FailureLog } from '../../kernel/failure-log.js';
import type { Logger } from '../../kernel/log.js';
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
  private vacuums: NodeJS.Timeout | undefined;
  /** The vacuum under way, which close() waits for (it would fail on a closed PGlite, and log so). */
  private vacuuming: Promise<void> | undefined;
  /** A statement ran since the last vacuum (reads too: telling them apart is not worth it): an idle store is left alone. */
  private written = false;
  /** The tables a vacuum covers (listed once: only migrations, before the first, add any). */
  private ownTables: string | null | undefined;

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

  /**
   * Vacuums the database every intervalMs when it was used since: PGlite, single-user
   * PostgreSQL, runs no autovacuum, so the rows a DELETE or an UPDATE leaves dead (the usage rows
   * each fold moves, released holds, expired stored responses) would stay in the tables and
   * their indexes for good, the files growing with every write ever made, and a table's scans
   * reading all of it. A vacuum after the first skips the pages it found clean (the visibility map).
   * Call it once migrated.
   */
  vacuumEvery(intervalMs: number, log?: Logger): void {
    if (intervalMs <= 0) return;
    const failures = log ? new FailureLog(log, 'PGlite vacuum') : undefined;
    this.vacuums = setInterval(() => {
      if (!this.written || this.db.closed) return;
      this.written = false;
      // Through db.query, not this.query: it marks nothing written, and its pages need no durable
      // copy of their own (a crash loses a vacuum, which the next one redoes).
      this.vacuuming = this.vacuumOwnTables().then(
        () => failures?.succeeded(),
        (err: Error) => failures?.failed(err),
      );
    }, intervalMs);
    this.vacuums.unref();
  }

  /** The schema's own tables: 1 ms here, where the catalogs too (a plain VACUUM) took 5-80. */
  private async vacuumOwnTables(): Promise<void> {
    this.ownTables ??= (
      await this.db.query<{ list: string | null }>(
        "SELECT string_agg(quote_ident(relname), ', ') AS list FROM pg_class WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace",
      )
    ).rows[0]?.list;
    if (!this.ownTables) return;
    // A vacuum sizes its list of dead rows up front, by the table, up to maintenance_work_mem
    // (16MB here): in WebAssembly memory, which never shrinks. A minute's dead rows fit in 1MB.
    await this.db.query("SET maintenance_work_mem = '1MB'");
    try {
      await this.db.query(`VACUUM ${this.ownTables}`);
    } finally {
      await this.db.query('RESET maintenance_work_mem');
    }
  }

  /** A tarball of the whole database, to start other instances from (tests). */
  async image(): Promise<Blob | File> {
    return this.db.dumpDataDir('none');
  }

  async query<R>(sql: string, params?: unknown[]): Promise<QueryResult<R>> {
    this.written = true;
    this.snapshots?.touched();
    const r = await this.db.query<R>(sql, params as unknown[]);
    return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
  }

  async tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    this.written = true;
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
    clearInterval(this.vacuums);
    await this.vacuuming;
    try {
      await this.db.close();
      // The folder as the clean shutdown left it, durable: a machine crash after this loses nothing.
      await this.snapshots?.stop(true);
    } finally {
      await this.lock?.release();
    }
  }
}
