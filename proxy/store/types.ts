import type { Logger } from '../../kernel/log.js';

export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

/** What both backends share: parameterised SQL. BIGINT comes back as string (pg) or bigint (PGlite): read it with BigInt(). */
export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: unknown[], opts?: QueryOptions): Promise<QueryResult<R>>;
}

export interface QueryOptions {
  /**
   * A name to keep the statement parsed and planned under, for a statement run again and again
   * with other parameters (the billing commit): PostgreSQL makes it a named prepared statement
   * on each connection, which saves parsing and planning it each time; PGlite ignores it.
   */
  prepare?: string;
}

export interface Store extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs fn in one transaction; commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /**
   * Present when a commit does not reach stable storage by itself (PGlite on a folder keeps
   * durable copies instead, see durable.ts): resolves once everything committed before the call
   * survives a machine crash; urgent: without waiting for the next periodic copy. Absent: a
   * resolved commit is durable (PostgreSQL).
   */
  durable?: (urgent?: boolean) => Promise<void>;
}

export interface StoreOptions {
  /** postgres://... — a real PostgreSQL. */
  databaseUrl?: string;
  /** PGlite data folder; absent (and no databaseUrl) -> in-memory PGlite. */
  dataDir?: string;
  /** PostgreSQL schema to live in (created if missing); tests use one per suite. */
  schema?: string;
  /** pg pool size (default 10). */
  poolSize?: number;
  /** PGlite on a folder: how often a durable copy of it is made while it is written (ms; default 5000; 0: never). */
  snapshotIntervalMs?: number;
  /**
   * PGlite: how often it is vacuumed when something was written since (ms; default 60000, as
   * PostgreSQL's autovacuum looks; 0: never). PGlite is single-user PostgreSQL and runs no autovacuum.
   */
  vacuumIntervalMs?: number;
  /** PGlite on a folder: in a worker thread of its own (default), or false: on the calling thread. */
  thread?: boolean;
  /**
   * PGlite in its worker thread: told once if the thread ends other than by close() (a crash, its
   * memory exhausted). Every call fails from then on; the owner should stop and start again.
   */
  onLost?: (err: Error) => void;
  /** Told about start-up recovery and failed copies. */
  log?: Logger;
}
