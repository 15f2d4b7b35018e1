import { randomInt } from 'node:crypto';
import type { Store } from '../store/index.js';
import { writeCommitLines } from './commit.js';
import type { ChargeJournal, JournalSegment } from './journal.js';

/**
 * The billing journal as a table in PostgreSQL (migration 040): a settled request's charge is
 * durable once its line is in a row of billing_journal, and billing_commit() takes the rows
 * behind, in large batches, as it takes a local journal's segments. Each request's answer waits
 * for one insert into a table with one index instead of billing_commit()'s usage record, ledger
 * row and three updates: on this machine 0.23 ms against 0.8-0.9 for one request (pgbench,
 * `synchronous_commit` on), the WAL flush being the same. Unlike a local journal it lives as long
 * as the database does, so losing a node loses no charge.
 *
 * Every append that queues while a row is being written goes in the next row, one row per
 * insert. A row is deleted once the store has taken all of its lines; the rows of a replica that
 * died are folded by any replica's sweeper once older than half a lease (foldJournalTable).
 *
 * A row's id is chosen here, not returned by the insert: `RETURNING id` made the driver read a
 * row description and a data row on the way to every answer's last byte (from PostgreSQL's
 * reply to the answer's write, 7 of 31 µs at one connection). Ids are a random base of this
 * journal's, drawn among 2^31, plus a counter; an id some other journal took (the same base
 * drawn) fails the insert, which draws a new base and writes again.
 */

interface Row extends JournalSegment {
  id: string;
  /** Lines the store has not taken yet. */
  left: number;
}

interface Waiter {
  line: string;
  resolve(row: JournalSegment): void;
  reject(err: Error): void;
}

/** Most lines in one row: a row is read back whole when it is folded. */
const MAX_LINES = 500;
/** Ids of one base: a journal that writes this many rows draws a new one. */
const PER_BASE = 2 ** 32;
/** A unique violation: the id is taken. */
const UNIQUE_VIOLATION = '23505';
/** An insert that fails is tried again this many times (a retried insert that did land leaves a row its lines are already in: folding it charges nothing). */
const RETRIES = 3;

export class TableJournal implements ChargeJournal {
  private pending: Waiter[] = [];
  private writing: Promise<void> | undefined;
  /** Rows the store has every line of, to delete. */
  private done: string[] = [];
  private deleting: Promise<void> | undefined;
  private closed = false;
  private base = drawBase();
  private count = 0;
  /** Told when a row the store has could not be deleted (the sweeper folds it again, charging nothing). */
  onError: ((err: Error) => void) | undefined;

  constructor(private readonly store: Store) {
    if (store.kind !== 'postgres')
      throw new Error('the billing journal table needs PostgreSQL (DATABASE_URL): PGlite makes a commit durable only in its copies');
  }

  append(record: string, alone = false): Promise<JournalSegment> {
    if (this.closed) return Promise.reject(new Error('the billing journal is closed'));
    return new Promise((resolve, reject) => {
      this.pending.push({ line: record, resolve, reject });
      this.kick(alone);
    });
  }

  committed(seg: JournalSegment, n: number): void {
    const row = seg as Row;
    row.left -= n;
    if (row.left > 0) return;
    this.done.push(row.id);
    this.deleting ??= new Promise((r) => setImmediate(r)).then(() => this.deleteDone());
  }

  async close(): Promise<void> {
    this.closed = true;
    while (this.writing || this.deleting) await (this.writing ?? this.deleting);
  }

  /**
   * One insert at a time. A lone record is written at once; otherwise the insert waits for the
   * event loop's pending I/O (setImmediate), so every request whose answer is already in joins it.
   */
  private kick(alone: boolean): void {
    if (this.writing || this.pending.length === 0) return;
    this.writing = (alone ? this.writeNext() : new Promise<void>((r) => setImmediate(r)).then(() => this.writeNext())).finally(() => {
      this.writing = undefined;
      this.kick(false);
    });
  }

  private async writeNext(): Promise<void> {
    const batch = this.pending.splice(0, MAX_LINES);
    const lines = batch.map((b) => b.line).join('\n');
    for (let attempt = 0; ; attempt++) {
      try {
        if (this.count === PER_BASE) [this.base, this.count] = [drawBase(), 0];
        const id = String(this.base + BigInt(this.count++));
        await this.store.query('INSERT INTO billing_journal (id, lines) OVERRIDING SYSTEM VALUE VALUES ($1, $2)', [id, lines], {
          prepare: 'billing_journal_append',
        });
        const row: Row = { name: `billing_journal:${id}`, id, left: batch.length };
        for (const b of batch) b.resolve(row);
        return;
      } catch (err) {
        if ((err as { code?: string }).code === UNIQUE_VIOLATION) [this.base, this.count] = [drawBase(), 0];
        if (attempt >= RETRIES) {
          for (const b of batch) b.reject(err as Error);
          return;
        }
        await new Promise((r) => setTimeout(r, 50 * 4 ** attempt));
      }
    }
  }

  private async deleteDone(): Promise<void> {
    while (this.done.length) {
      const ids = this.done.splice(0);
      await this.store.query('DELETE FROM billing_journal WHERE id = ANY($1::bigint[])', [ids]).catch((err: Error) => this.onError?.(err));
    }
    this.deleting = undefined;
  }
}

/** A multiple of 2^32 past the ids PostgreSQL's own identity gives (rows written by hand). */
function drawBase(): bigint {
  return BigInt(randomInt(1, 2 ** 31)) << 32n;
}

/**
 * Folds rows older than `olderThanMs` into the store, a batch of rows per transaction, and
 * deletes them with it: rows whose replica died, or could not reach the store that long. A row
 * another replica is folding is skipped. Returns how many lines were folded.
 */
export async function foldJournalTable(store: Store, olderThanMs: number): Promise<number> {
  let folded = 0;
  for (;;) {
    const n = await store.tx(async (q) => {
      const rows = (
        await q.query<{ id: unknown; lines: string }>(
          `SELECT id, lines FROM billing_journal WHERE at < now() - $1::int * interval '1 millisecond' ORDER BY id LIMIT 20 FOR UPDATE SKIP LOCKED`,
          [Math.round(olderThanMs)],
        )
      ).rows;
      if (rows.length === 0) return 0;
      const lines = rows.flatMap((r) => r.lines.split('\n'));
      await writeCommitLines(q, lines);
      await q.query('DELETE FROM billing_journal WHERE id = ANY($1::bigint[])', [rows.map((r) => String(r.id))]);
      return lines.length;
    });
    if (n === 0) return folded;
    folded += n;
  }
}

/** Whether any row is left (a replica that used the table journal may have left some). */
export async function journalTableHasRows(store: Store): Promise<boolean> {
  return (await store.query('SELECT 1 FROM billing_journal LIMIT 1')).rows.length > 0;
}
