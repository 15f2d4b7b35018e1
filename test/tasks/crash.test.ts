import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { apiKey, group } from '../support/resources.js';
import { serveChild, serveTargets, writeManifests, type ServeTarget } from '../support/serve-child.js';
import { C, client, grant, imageRoute, KEY } from './support.js';

/**
 * A `tollgate serve` process killed with SIGKILL while a worker holds a task (its upstream call
 * in flight): after a restart on the same database the task is taken up again once its lease
 * runs out, completes, and is charged once.
 */
const ENV = { TOLLGATE_TASK_LEASE_SECONDS: '1.5', TOLLGATE_TASK_POLL_SECONDS: '0.05', TOLLGATE_TASK_RETRY_SECONDS: '0.05', TOLLGATE_LOG_LEVEL: 'info' };

let sim: Simulator;
let configDir: string;
beforeAll(async () => {
  sim = await startSimulator();
  configDir = await writeManifests(
    [imageRoute('img', 'openai', `${sim.url}/v1`, { model: 'image-sim' }), group('g', ['img']), apiKey('k', KEY, 'g', { account: 'acct' })],
    'tollgate-crash-config-',
  );
});
afterAll(async () => {
  await sim?.close();
  if (configDir) await rm(configDir, { recursive: true, force: true });
});

const serve = (t: ServeTarget) => serveChild(t, configDir, { env: ENV });

for (const { name, make } of serveTargets('tollgate-crash-')) {
  describe(`a worker killed mid-task on ${name}`, () => {
    let t: ServeTarget;
    const children: ChildProcess[] = [];
    beforeAll(async () => {
      t = await make();
      const s = await t.open();
      await grant(s, 'acct', 10n * C);
      await s.close();
    });
    afterAll(async () => {
      for (const c of children) c.kill('SIGKILL');
      await t?.dispose();
    });

    it('is taken up again when its lease runs out after a restart, completes, and is charged once', async () => {
      const first = await serve(t);
      children.push(first.child);
      expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const marker = `crash-${randomBytes(4).toString('hex')}`;
      sim.context.latencyMs = 120_000; // the first upstream call hangs until the process dies
      const sub = await client(first.url).submit('/v1/images/generations', { model: 'img', prompt: marker, size: '64x64' });
      expect(sub.status).toBe(200);
      const deadline = performance.now() + 20_000;
      while (sim.recorder.find(marker).length === 0) {
        if (performance.now() > deadline) throw new Error('the upstream call never started');
        await new Promise((r) => setTimeout(r, 20));
      }
      first.child.kill('SIGKILL');
      await first.exited;
      sim.context.latencyMs = 0;

      const second = await serve(t);
      children.push(second.child);
      const done = await client(second.url).until(sub.json.id, 30_000);
      expect(done.status).toBe('succeeded');
      expect((await fetch(done.data![0]!.url)).status).toBe(200);
      const calls = sim.recorder.find(marker);
      expect(calls).toHaveLength(2);
      expect(calls[0]!.aborted).toBe(true);

      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
      const s = await t.open();
      try {
        const rows = await s.query<{ kind: string }>('SELECT kind FROM ledger WHERE operation_id = $1 OR hold_id = $1 ORDER BY id', [`task:${sub.json.id}`]);
        expect(rows.rows.map((r) => r.kind)).toEqual(['hold', 'capture']);
        expect(await accountState(s, 'acct')).toEqual({ balance: 10n * C - 20_000n, held: 0n });
        expect(await verifyLedger(s)).toEqual([]);
      } finally {
        await s.close();
      }
    });
  });
}
