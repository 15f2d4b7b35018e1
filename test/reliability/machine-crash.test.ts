import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountState, credit, verifyLedger } from '../../proxy/billing/index.js';
import { openStore } from '../../proxy/store/index.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { until } from '../billing/support.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { pgliteTarget, serveChild, writeManifests, type ServeChild } from '../support/serve-child.js';
import { crashImage, readEvents, seedDurable, shadowId } from './crash-image.js';

/**
 * Machine crashes, simulated honestly. `serve --data` runs under chat load with disk-shadow.js
 * preloaded: it records every operation that puts data on stable storage (fsync of a file or a
 * folder, a write on an O_DSYNC descriptor), in order, and nothing else. The crash happens at a
 * random point of that record (anywhere: during start-up and its journal replay, in the middle
 * of a durable copy, between a charge and its answer): the data folder is rebuilt as the disk
 * would hold it then — files and folder entries as last synced, everything else lost (PGlite's
 * own files, which it never syncs, are empty or missing). A client's answer counts as received
 * before the crash when the record was no longer than that point as the client got its end
 * (the gateway records a durable write before it goes on). The next gateway starts on that
 * folder, as another boot, under load again, and is crashed in turn; three times. A last one
 * starts on the last image and resolves what the dead ones left. Then: the ledger consistent,
 * nothing held, balance = grant - usage, every chat answer a client received whole before its
 * crash charged exactly once, and no request charged twice.
 */
const KEY = 'sk-service-machine-crash';
const ADMIN = 'machine-crash-admin';
const GRANT = 1_000_000_000n;
const ROUNDS = 3;
const PRELOAD = fileURLToPath(new URL('./disk-shadow.js', import.meta.url));
const ENV = {
  DATABASE_URL: '',
  TOLLGATE_DATA_SNAPSHOT_SECONDS: '0.5',
  TOLLGATE_BILLING_LEASE_SECONDS: '1.5',
  TOLLGATE_BILLING_SWEEP_SECONDS: '0.3',
  TOLLGATE_LOG_LEVEL: 'info',
};

let sim: Simulator;
let configDir: string;
let work: string;
beforeAll(async () => {
  sim = await startSimulator();
  configDir = await writeManifests(
    [
      chatRoute('m', `${sim.url}/v1`, { pricing: { inputPerMillion: '1', outputPerMillion: '2' } }),
      group('g', ['m']),
      apiKey('k', KEY, 'g', { account: 'acct' }),
    ],
    'tollgate-crash-config-',
  );
  work = await mkdtemp(join(tmpdir(), 'tollgate-crash-'));
});
afterAll(async () => {
  await sim?.close();
  if (configDir) await rm(configDir, { recursive: true, force: true });
  if (work) await rm(work, { recursive: true, force: true });
});

interface Complete {
  id: string;
  /** The size of the gateway's durable record when the client had the whole answer. */
  at: number;
}

/** Chat load (JSON and streams) until stopped; answers received whole go to `complete`. */
function load(url: string, round: number, log: string, complete: Complete[]): { stop(): void; done: Promise<void> } {
  let stopped = false;
  let n = 0;
  const worker = async (stream: boolean) => {
    while (!stopped) {
      const id = `crash-${round}-${stream ? 's' : 'j'}-${++n}`;
      try {
        const r = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': id },
          body: JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: `[sim:tokens=30] ${id}` }] }),
          signal: AbortSignal.timeout(10_000),
        });
        const text = await r.text();
        const whole = r.status === 200 && (stream ? text.trimEnd().endsWith('data: [DONE]') : (JSON.parse(text) as { usage?: unknown }).usage !== undefined);
        if (whole && !stopped) complete.push({ id, at: statSync(log).size });
      } catch {
        // the machine died under this request
        if (stopped) return;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };
  const done = Promise.all([worker(false), worker(false), worker(true), worker(true)]).then(() => {});
  return { stop: () => (stopped = true), done };
}

/** The gateway on `dir`, as boot `boot`, with its durable operations recorded in `log`. */
function start(dir: string, log: string, boot: string): Promise<ServeChild> {
  return serveChild(pgliteTarget(dir), configDir, {
    args: ['--admin-token', ADMIN],
    env: { ...ENV, NODE_OPTIONS: `--import=${PRELOAD}`, SHADOW_ROOT: dir, SHADOW_LOG: log, SHADOW_BOOT_ID: boot },
  });
}

describe('serve --data (PGlite) after machine crashes', () => {
  it(`${ROUNDS} simulated power losses under load: the gateway starts on what the disk held, and every answer a client received whole is charged exactly once`, async () => {
    // The set-up's grant, made durable (fsynced) before the first gateway starts.
    let dir = join(work, 'disk-0');
    const s = await openStore({ dataDir: join(dir, 'pg') });
    await s.tx((q) => credit(q, { account: 'acct', operationId: 'crash-grant', amount: GRANT }));
    await s.close();

    const seen: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const log = join(work, `shadow-${round}.log`);
      seedDurable(dir, log);
      const seeded = readEvents(log).length;
      const root = shadowId(dir);
      const complete: Complete[] = [];
      const gw = await start(dir, log, `boot-${round}`);
      try {
        const l = load(gw.url, round, log, complete);
        // Under load until a durable copy has been made (and some answers received), then a moment more.
        const copies = () => readEvents(log).filter((e, i) => i >= seeded && e.event.t === 'dir' && e.event.path === join(dir, 'pg.durable')).length;
        await until(
          async () => ({ copies: copies(), answers: complete.length }),
          (p) => p.copies > 0 && p.answers > 0,
          120_000,
          'a durable copy under load',
        );
        await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 3000)));
        gw.child.kill('SIGSTOP');
        l.stop();
        gw.child.kill('SIGKILL');
        await gw.exited;
        await l.done;
      } finally {
        gw.child.kill('SIGKILL');
      }
      // The machine died after event k (the set-up's own events are durable before the start).
      const events = readEvents(log);
      const k = seeded + Math.floor(Math.random() * (events.length - seeded + 1));
      const upto = k === 0 ? 0 : events[k - 1]!.end;
      seen.push(...complete.filter((c) => c.at <= upto).map((c) => c.id));
      const next = join(work, `disk-${round + 1}`);
      crashImage(log, k, root, next);
      // Not generous: PGlite never syncs, so its live folder is lost (only the durable copy and the journal remain).
      if (round > 0) expect(existsSync(join(next, 'pg', 'PG_VERSION')) && readFileSync(join(next, 'pg', 'PG_VERSION')).length > 0).toBe(false);
      dir = next;
    }

    // The last gateway, on the last image: it restores, replays the journal and sweeps the dead leases.
    const log = join(work, 'shadow-last.log');
    const last = await start(dir, log, 'boot-last');
    try {
      const admin = (path: string) =>
        fetch(`${last.adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.json() as Promise<Record<string, unknown>>);
      await until(
        () => admin('/admin/v1/accounts/acct'),
        (a) => a.held === '0.000000',
        30_000,
        'every dead lease to be released',
      );
    } finally {
      last.child.kill('SIGTERM');
    }
    expect(await last.exited).toBe(0);

    expect(seen.length).toBeGreaterThan(0);
    const store = await pgliteTarget(dir).open();
    try {
      expect(await verifyLedger(store)).toEqual([]);
      const state = await accountState(store, 'acct');
      expect(state.held).toBe(0n);
      const usage = await store.query<{ request_id: string; n: string; credits: string }>(
        "SELECT request_id, COUNT(*)::text AS n, SUM(credits)::text AS credits FROM usage_records WHERE account = 'acct' GROUP BY request_id",
      );
      const charged = new Map(usage.rows.map((r) => [r.request_id, Number(r.n)]));
      for (const id of seen) expect(charged.get(id), id).toBe(1);
      for (const [id, n] of charged) expect(n, id).toBe(1);
      const spent = usage.rows.reduce((a, r) => a + BigInt(r.credits), 0n);
      expect(spent).toBeGreaterThan(0n);
      expect(state.balance).toBe(GRANT - spent);
    } finally {
      await store.close();
    }
  }, 600_000);
});
