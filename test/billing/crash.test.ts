import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../proxy/billing/ledger.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { serveChild, serveTargets, writeManifests, type ServeTarget } from '../support/serve-child.js';
import { books, C, until } from './support.js';

/**
 * A `tollgate serve` process killed with SIGKILL in the middle of 50 streams leaves its lease
 * behind. After a restart on the same database, the sweeper releases it once its deadline
 * passes: nothing stays held, the requests that finished before the kill stay charged, and the
 * ledger invariant holds.
 */
const KEY = 'sk-service-billing-crash';
const ADMIN = 'crash-admin';
const ENV = { TOLLGATE_BILLING_LEASE_SECONDS: '1.5', TOLLGATE_BILLING_SWEEP_SECONDS: '0.3', TOLLGATE_LOG_LEVEL: 'info' };

let sim: Simulator;
let configDir: string;
beforeAll(async () => {
  sim = await startSimulator();
  configDir = await writeManifests(
    [chatRoute('m', `${sim.url}/v1`, { pricing: { inputPerMillion: '1', outputPerMillion: '2' } }), group('g', ['m']), apiKey('k', KEY, 'g', { account: 'acct' })],
    'tollgate-billing-crash-config-',
  );
});
afterAll(async () => {
  await sim?.close();
  if (configDir) await rm(configDir, { recursive: true, force: true });
});

const serve = (t: ServeTarget) => serveChild(t, configDir, { args: ['--admin-token', ADMIN], env: ENV });

for (const { name, make } of serveTargets('tollgate-billing-crash-')) {
  describe(`a gateway killed mid-stream on ${name}`, () => {
    let t: ServeTarget;
    const children: ChildProcess[] = [];
    beforeAll(async () => {
      t = await make();
      const s = await t.open();
      await s.tx((q) => credit(q, { account: 'acct', operationId: 'crash-grant', amount: 100n * C }));
      await s.close();
    });
    afterAll(async () => {
      for (const c of children) c.kill('SIGKILL');
      await t?.dispose();
    });

    it('leaves a lease that the sweeper of the restarted gateway releases; finished requests stay charged; the books add up', async () => {
      const first = await serve(t);
      children.push(first.child);
      const client = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: KEY, maxRetries: 0 });
      for (let i = 0; i < 5; i++) await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `before ${i}` }] });

      const marker = `crash-${randomBytes(4).toString('hex')}`;
      sim.context.chunkDelayMs = 100; // 100 words: ten seconds a stream
      let firstChunks = 0;
      let completed = 0;
      const streams = Array.from({ length: 50 }, async (_, i) => {
        try {
          const s = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: `[sim:tokens=100] ${marker} ${i}` }] });
          let first = true;
          for await (const _ of s) {
            if (first) firstChunks++;
            first = false;
          }
          completed++;
        } catch {
          // the gateway died under it
        }
      });
      await until(async () => firstChunks, (n) => n === 50, 30_000, 'all 50 streams to start');
      first.child.kill('SIGKILL');
      await first.exited;
      await Promise.all(streams);
      sim.context.chunkDelayMs = 0;
      expect(completed).toBe(0);

      const second = await serve(t);
      children.push(second.child);
      const account = () =>
        fetch(`${second.adminUrl}/admin/v1/accounts/acct`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.json() as Promise<{ held: string; balance: string }>);
      // The dead replica's lease stops being renewed; past its deadline the sweeper releases it.
      await until(account, (a) => a.held === '0.000000', 20_000, 'the dead lease to be released');
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);

      const s = await t.open();
      try {
        const b = await books(s, 'acct');
        expect(b.openHolds).toBe(0);
        expect(b.held).toBe(0n);
        expect(b.usageRecords).toBe(5);
        expect(b.balance).toBe(b.grants - b.usageCredits);
        expect(b.violations).toEqual([]);
        const released = await s.query<{ n: unknown }>("SELECT COUNT(*) AS n FROM ledger WHERE kind = 'release' AND meta->>'reason' = 'expired'");
        expect(Number(released.rows[0]!.n)).toBe(1);
      } finally {
        await s.close();
      }
    }, 120_000);
  });
}
