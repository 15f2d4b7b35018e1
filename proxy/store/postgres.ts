import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Queryable, QueryOptions, QueryResult, Store } from './types.js';

/**
 * What a pooler in transaction mode answers a named statement with (PgBouncer before 1.21, or
 * without max_prepared_statements, hands each statement any server connection): prepared on
 * another one (26000), prepared twice (42P05). And a cached plan whose result type changed under
 * it (0A000, a migration). In each the statement did not run (a statement that failed running
 * left nothing either), so it is run again, unnamed.
 */
const NAMED_STATEMENT_FAILURES = new Set(['26000', '42P05', '0A000']);

/**
 * A named statement as a query object, which pg runs as given. Given a config object instead
 * (`{ name, text, values }`), pg 8.23 copies it whole per query, through its property descriptors
 * (utils.cloneQueryConfig, brianc/node-postgres#3720; #3743 would drop the copy): about 9k
 * instructions a query, a fifth of what the journal's insert cost the gateway (callgrind, one
 * connection). A text with values is not copied, so unnamed statements go as text. pg-pool
 * resolves a query object's promise with its result, as it does a config's.
 */
class NamedQuery extends pg.Query {
  constructor(name: string, text: string, values: unknown[] | undefined) {
    super(text, values);
    (this as { name?: string }).name = name;
  }
}

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly pool: pg.Pool;
  /** Set once a named statement failed as through a pooler: from then on every statement goes unnamed. */
  private unnamed = false;
  /**
   * Each statement's name: the caller's, and a hash of the text, so that two versions of a
   * statement (replicas of two releases behind one pooler) never share a name.
   */
  private readonly names = new Map<string, string>();

  constructor(url: string, opts: { schema?: string; poolSize?: number } = {}) {
    this.pool = new pg.Pool({
      connectionString: url,
      max: opts.poolSize ?? 10,
      ...(opts.schema ? { options: `-c search_path=${opts.schema}` } : {}),
    });
    // An idle client that loses its server must not crash the process.
    this.pool.on('error', () => {});
  }

  async query<R>(sql: string, params?: unknown[], opts?: QueryOptions): Promise<QueryResult<R>> {
    const name = this.unnamed || !opts?.prepare ? undefined : this.nameOf(opts.prepare, sql);
    try {
      const r = (await (name ? this.pool.query(new NamedQuery(name, sql, params) as never) : this.pool.query(sql, params))) as pg.QueryResult;
      return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
    } catch (err) {
      if (!name || !NAMED_STATEMENT_FAILURES.has((err as { code?: string }).code ?? '')) throw err;
      this.unnamed = true;
      return this.query(sql, params);
    }
  }

  private nameOf(prepare: string, sql: string): string {
    let name = this.names.get(sql);
    if (name === undefined) this.names.set(sql, (name = `${prepare}_${createHash('sha256').update(sql).digest('hex').slice(0, 12)}`));
    return name;
  }

  async tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const q: Queryable = {
      query: async <R>(sql: string, params?: unknown[]) => {
        const r = await client.query(sql, params as unknown[]);
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      },
    };
    try {
      await client.query('BEGIN');
      const out = await fn(q);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
