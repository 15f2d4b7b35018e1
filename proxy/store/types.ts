export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

/** What both backends share: parameterised SQL. BIGINT comes back as string (pg) or bigint (PGlite): read it with BigInt(). */
export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<R>>;
}

export interface Store extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs fn in one transaction; commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
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
}
