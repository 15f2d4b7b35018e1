import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { accountState, credit } from '../../proxy/billing/ledger.js';
import { foldUsageRollups } from '../../proxy/billing/usage.js';
import { latestSnapshot } from '../../proxy/store/durable.js';
import { openStore } from '../../proxy/store/index.js';

/**
 * PGlite on a data folder is copied durably while it is written (proxy/store/durable.ts). An idle
 * gateway still queries its store every few seconds (the rollup fold, the task and delivery
 * workers' claims, the sweeper): those reads change no file, yet each marks the store written, so
 * an idle quickstart made a new copy every five seconds, a thousand links and some thirty folders
 * fsynced each.
 */
const root = mkdtempSync(join(tmpdir(), 'tollgate-durable-copies-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('durable copies of a PGlite data folder', () => {
  it('are made when the store is written, not while it only answers reads, and hold the writes', async () => {
    const dir = join(root, 'pg');
    // Copies only on demand here: durable(true) starts one at once.
    const store = await openStore({ dataDir: dir, snapshotIntervalMs: 3_600_000, vacuumIntervalMs: 0 });
    try {
      await store.durable!(true);
      // A file written within 2 s of a copy is copied again by the next (a timestamp that coarse
      // could hide a later write): this one leaves every file older than that.
      await new Promise((r) => setTimeout(r, 2_100));
      await store.durable!(true);
      const settled = latestSnapshot(dir);
      expect(settled).toBeDefined();

      // What an idle gateway asks of its store.
      await store.query('SELECT count(*) FROM usage_records');
      expect(await foldUsageRollups(store)).toBe(0);
      await store.durable!(true);
      expect(latestSnapshot(dir)).toBe(settled);

      await store.tx((q) => credit(q, { account: 'a', operationId: 'grant-1', amount: 123n }));
      await store.durable!(true);
      const written = latestSnapshot(dir);
      expect(written).not.toBe(settled);

      // The copy is a data folder that opens with the write in it (what a machine crash now would restore).
      const restored = join(root, 'restored');
      cpSync(written!, restored, { recursive: true });
      const copy = await openStore({ dataDir: restored, snapshotIntervalMs: 0, vacuumIntervalMs: 0, thread: false });
      try {
        expect(await accountState(copy, 'a')).toEqual({ balance: 123n, held: 0n });
      } finally {
        await copy.close();
      }
    } finally {
      await store.close();
    }
  }, 60_000);
});
