import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../proxy/store/index.js';
import { InitdbError, initdbApart } from '../../proxy/store/initdb.js';

const root = mkdtempSync(join(tmpdir(), 'tollgate-initdb-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a new PGlite data folder', () => {
  it('gets its cluster from a child process; the store opens it, and an existing cluster is left as it is', async () => {
    const dir = join(root, 'new');
    mkdirSync(dir);
    await initdbApart(dir);
    expect(existsSync(join(dir, 'PG_VERSION'))).toBe(true);

    const s = await openStore({ dataDir: dir, snapshotIntervalMs: 0 });
    try {
      await s.query('CREATE TABLE kept (v TEXT)');
      await s.query("INSERT INTO kept VALUES ('first start')");
    } finally {
      await s.close();
    }
    const made = statSync(join(dir, 'PG_VERSION')).mtimeMs;
    await initdbApart(dir);
    expect(statSync(join(dir, 'PG_VERSION')).mtimeMs).toBe(made);
    const again = await openStore({ dataDir: dir, snapshotIntervalMs: 0 });
    try {
      expect((await again.query<{ v: string }>('SELECT v FROM kept')).rows).toEqual([{ v: 'first start' }]);
    } finally {
      await again.close();
    }
  }, 60_000);

  it('left half-made by a first start cut short is made again, and the store opens it', async () => {
    const dir = join(root, 'half');
    mkdirSync(join(dir, 'base', '1'), { recursive: true });
    writeFileSync(join(dir, 'base', '1', 'torn-leftover'), 'a torn page');
    writeFileSync(join(dir, 'postgresql.conf'), 'half written');
    const s = await openStore({ dataDir: dir, snapshotIntervalMs: 0 });
    try {
      expect((await s.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    } finally {
      await s.close();
    }
    expect(existsSync(join(dir, 'base', '1', 'torn-leftover'))).toBe(false);
    expect(existsSync(`${dir}.initdb`)).toBe(false);
  }, 60_000);

  it('that cannot be made fails with the folder and the reason, and leaves nothing behind', async () => {
    const file = join(root, 'a-file');
    writeFileSync(file, 'not a folder');
    const dir = join(file, 'pg');
    const err = await initdbApart(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InitdbError);
    expect((err as Error).message).toContain(`initdb of ${dir} failed`);
    expect((err as Error).message).toMatch(/ErrnoError|ENOTDIR/);
    expect(readdirSync(root).filter((n) => n.startsWith('a-file'))).toEqual(['a-file']);
  }, 60_000);
});
