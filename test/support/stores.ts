import { randomBytes } from 'node:crypto';
import { migrate, openStore, type Store } from '../../proxy/store/index.js';
import { PgliteStore } from '../../proxy/store/pglite.js';

export interface StoreCase {
  name: 'pglite' | 'postgres';
  open(): Promise<Store>;
}

/**
 * The backends every store test runs on: PGlite always, PostgreSQL when DATABASE_URL is set
 * (CI sets it). Each open() gets an empty database: a fresh in-memory PGlite, or a new schema.
 */
export function storeCases(): StoreCase[] {
  const cases: StoreCase[] = [{ name: 'pglite', open: openPglite }];
  const url = process.env.DATABASE_URL;
  if (url) {
    cases.push({
      name: 'postgres',
      open: () => openStore({ databaseUrl: url, schema: `t_${randomBytes(6).toString('hex')}` }),
    });
  }
  return cases;
}

/** Drops a test schema on PostgreSQL (no-op for PGlite) and closes the store. */
export async function disposeStore(store: Store): Promise<void> {
  if (store.kind === 'postgres') {
    const r = await store.query<{ s: string }>('SELECT current_schema() AS s');
    const schema = r.rows[0]?.s;
    if (schema?.startsWith('t_')) await store.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
  await store.close();
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
