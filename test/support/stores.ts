import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openStore, type Queryable, type QueryOptions, type Store } from '../../proxy/store/index.js';
import { PgliteStore } from '../../proxy/store/pglite.js';

export interface StoreCase {
  name: 'pglite' | 'postgres' | 'pglite-thread';
  open(): Promise<Store>;
}

/**
 * The backends every store test runs on: PGlite always, PostgreSQL when DATABASE_URL is set
 * (CI sets it). Each open() gets an empty database: a fresh in-memory PGlite, or a new schema.
 * `thread`: also PGlite on a data folder in its worker thread, as `tollgate serve --data` runs it
 * (pglite-thread.ts), for the suites whose transactions and errors cross the thread.
 */
export function storeCases(opts: { thread?: boolean } = {}): StoreCase[] {
  const cases: StoreCase[] = [{ name: 'pglite', open: openPglite }];
  if (opts.thread) cases.push({ name: 'pglite-thread', open: openPgliteThread });
  const url = process.env.DATABASE_URL;
  if (url) {
    cases.push({
      name: 'postgres',
      open: () => openStore({ databaseUrl: url, schema: `t_${randomBytes(6).toString('hex')}` }),
    });
  }
  return cases;
}

/** Drops a test schema on PostgreSQL, closes the store, and removes a data folder made for it. */
export async function disposeStore(store: Store): Promise<void> {
  if (store.kind === 'postgres') {
    const r = await store.query<{ s: string }>('SELECT current_schema() AS s');
    const schema = r.rows[0]?.s;
    if (schema?.startsWith('t_')) await store.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
  await store.close();
  const dir = folders.get(store);
  if (dir) rmSync(dir, { recursive: true, force: true });
}

const folders = new WeakMap<Store, string>();

/** The data folder openPgliteThread() made for `store`. */
export function folderOf(store: Store): string {
  const root = folders.get(store);
  if (!root) throw new Error('not a store of openPgliteThread()');
  return join(root, 'pg');
}

let folderTemplate: Promise<string> | undefined;

/**
 * PGlite on a new data folder, in its worker thread, with every migration applied. A new folder's
 * initdb costs about 4 s here; each test process makes one and copies it (under 0.1 s).
 */
export async function openPgliteThread(opts: { onLost?: (err: Error) => void; vacuumIntervalMs?: number } = {}): Promise<Store> {
  folderTemplate ??= (async () => {
    const root = mkdtempSync(join(tmpdir(), 'tollgate-store-template-'));
    process.once('exit', () => rmSync(root, { recursive: true, force: true }));
    const dir = join(root, 'pg');
    const s = await openStore({ dataDir: dir, snapshotIntervalMs: 0, thread: false });
    await s.close();
    return dir;
  })();
  const root = mkdtempSync(join(tmpdir(), 'tollgate-store-'));
  cpSync(await folderTemplate, join(root, 'pg'), { recursive: true });
  const store = await openStore({ dataDir: join(root, 'pg'), snapshotIntervalMs: 0, ...opts });
  folders.set(store, root);
  return store;
}

let image: Promise<Blob | File> | undefined;

/**
 * A fresh in-memory PGlite with every migration applied. Starting PGlite costs about 3 s on
 * this machine; starting one from a migrated image costs about 0.7 s, so each test process
 * migrates once and copies the image.
 */
export async function openPglite(): Promise<Store> {
  image ??= (async () => {
    const template = new PgliteStore();
    await migrate(template);
    const img = await template.image();
    await template.close();
    return img;
  })();
  const store = new PgliteStore(undefined, await image);
  await migrate(store); // a no-op unless migrations changed since the image
  return store;
}

/** The store with every statement, in a transaction or not, passed through `wrap`: for tests that break or stall it. */
export function wrapStore(store: Store, wrap: (q: Queryable) => Queryable): Store {
  return {
    kind: store.kind,
    query: <R>(sql: string, params?: unknown[], opts?: QueryOptions) => wrap(store).query<R>(sql, params, opts),
    tx: <T>(fn: (q: Queryable) => Promise<T>) => store.tx((q) => fn(wrap(q))),
    close: () => store.close(),
  };
}
