import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The durable floor's store: a line per answer in a row of a table with one index, committed
 * (`synchronous_commit` as the server has it) before the answer ends, as the gateway's journal
 * table does (proxy/billing/table-journal.ts), without anything else the gateway does. Lines that
 * queue while a row is being written go in the next row together: one insert per answer at one
 * connection, far fewer under load. In a schema of its own, dropped by close().
 */
export class FloorJournal {
  private pending: { line: string; resolve(): void; reject(err: Error): void }[] = [];
  private writing = false;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly table: string,
    private readonly schema: string,
  ) {}

  static async open(databaseUrl: string): Promise<FloorJournal> {
    const schema = `bench_floor_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".journal (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), lines text NOT NULL)`);
    return new FloorJournal(pool, `"${schema}".journal`, schema);
  }

  /** Resolves once `line` is committed. */
  append(line: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ line, resolve, reject });
      if (!this.writing) void this.write();
    });
  }

  private async write(): Promise<void> {
    this.writing = true;
    while (this.pending.length) {
      const batch = this.pending.splice(0);
      try {
        await this.pool.query({
          name: 'floor_journal_append',
          text: `INSERT INTO ${this.table} (lines) VALUES ($1)`,
          values: [batch.map((b) => b.line).join('\n')],
        });
        for (const b of batch) b.resolve();
      } catch (err) {
        for (const b of batch) b.reject(err as Error);
      }
    }
    this.writing = false;
  }

  async close(): Promise<void> {
    await this.pool.query(`DROP SCHEMA "${this.schema}" CASCADE`).catch(() => {});
    await this.pool.end();
  }
}
