import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Store } from './types.js';

const DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
// Any constant works; it only has to be the same in every replica.
const LOCK_ID = 7_470_707;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** migrations/NNN_name.sql in version order. */
export function loadMigrations(dir = DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d+_.+\.sql$/.test(f))
    .map((f) => ({ version: Number(f.split('_')[0]), name: f, sql: readFileSync(dir + f, 'utf8') }))
    .sort((a, b) => a.version - b.version);
}

/**
 * Applies pending migrations, each in its own transaction, under a transaction-level advisory
 * lock so that replicas starting together apply each migration exactly once.
 */
export async function migrate(store: Store, migrations = loadMigrations()): Promise<number[]> {
  await store.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
  const applied: number[] = [];
  for (const m of migrations) {
    const done = await store.tx(async (q) => {
      await q.query('SELECT pg_advisory_xact_lock($1)', [LOCK_ID]);
      const seen = await q.query('SELECT 1 FROM schema_migrations WHERE version = $1', [m.version]);
      if (seen.rows.length > 0) return false;
      for (const stmt of splitSql(m.sql)) await q.query(stmt);
      await q.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      return true;
    });
    if (done) applied.push(m.version);
  }
  return applied;
}

/** Statements split on ";" at line ends: PGlite's extended protocol takes one statement per query. */
function splitSql(sql: string): string[] {
  // Comments go first, so a comment line ending in ";" does not end a statement.
  return sql
    .replace(/^\s*--.*$/gm, '')
    .split(/;\s*$/m)
    .map((s) => s.trim())
    .filter(Boolean);
}
