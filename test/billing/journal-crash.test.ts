import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../proxy/billing/ledger.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { serveChild, serveTargets, writeManifests, type ServeTarget } from '../support/serve-child.js';
import { books, C, until } from './support.js';

/**
 * With a billing journal, a request's charge is durable on local disk when its last byte goes
 * out, and the store is written behind. Here the store write waits ten minutes, so every charge
 * of the finished requests is only in the journal when the gateway is killed with SIGKILL. The
 * restarted gateway replays the journal: every finished request is charged exactly once, the
 * dead lease is released, and the books add up.
 */
const KEY = 'sk-service-billing-journal-crash';
const ADMIN = 'journal-crash-admin';

let sim: Simulator;
let configDir: string;
beforeAll(async () => {
  sim = await startSimulator();
  configDir = await writeManifests(
    [chatRoute('m', `${sim.url}/v1`, { pricing: { inputPerMillion: '1', outputPerMillion: '2' } }), group('g', ['m']), apiKey('k', KEY, 'g', { account: 'acct' })],
    'tollgate-billing-journal-config-',
  );
});
afterAll(async () => {
  await sim?.close();
  if (configDir) await rm(configDir, { recursive: true, force: true });
});

for (const { name, make } of serveTargets('tollgate-billing-journal-')) {
  describe(`a gateway with a billing journal killed on ${name}`, () => {
    let t: ServeTarget;
    let journal: string;
    const children: ChildProcess[] = [];
    beforeAll(async () => {
      t = await make();
      journal = await mkdtemp(join(tmpdir(), 'tollgate-billing-journal-dir-'));
      const s = await t.open();
      await s.tx((q) => credit(q, { account: 'acct', operationId: 'grant', amount: 100n * C }));
      await s.close();
    });
    afterAll(async () => {
      for (const c of children) c.kill('SIGKILL');
      await t?.dispose();
      if (journal) await rm(journal, { recursive: true, force: true });
    });

    const serve = () =>
      serveChild(t, configDir, {
        args: ['--admin-token', ADMIN],
        env: {
          TOLLGATE_BILLING_JOURNAL_DIR: journal,
          TOLLGATE_BILLING_JOURNAL_FLUSH_MS: '600000',
          TOLLGATE_BILLING_LEASE_SECONDS: '1.5',
          TOLLGATE_BILLING_SWEEP_SECONDS: '0.3',
        },
      });

    it('charges every finished request exactly once after a restart replays the journal', async () => {
      const first = await serve();
      children.push(first.child);
      const client = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: KEY, maxRetries: 0 });
      let expected = 0n;
      for (let i = 0; i < 20; i++) {
        if (i % 2) {
          const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `[sim:tokens=${i + 1}] ask ${i}` }] });
          expected += BigInt(r.usage!.prompt_tokens) * 1n + BigInt(r.usage!.completion_tokens) * 2n;
        } else {
          const s = await client.chat.completions.create({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: `[sim:tokens=${i + 1}] ask ${i}` }] });
          for await (const chunk of s) if (chunk.usage) expected += BigInt(chunk.usage.prompt_tokens) * 1n + BigInt(chunk.usage.completion_tokens) * 2n;
        }
      }
      first.child.kill('SIGKILL');
      await first.exited;

      // Nothing reached the store: the charges of all 20 answers are in the journal alone.
      let s = await t.open();
      try {
        expect((await books(s, 'acct')).usageRecords).toBe(0);
      } finally {
        await s.close();
      }
      expect((await readdir(journal)).filter((f) => f.endsWith('.jsonl'))).toHaveLength(1);

      const second = await serve();
      children.push(second.child);
      const account = () =>
        fetch(`${second.adminUrl}/admin/v1/accounts/acct`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.json() as Promise<{ held: string; balance: string }>);
      await until(account, (a) => a.held === '0.000000', 20_000, 'the dead lease to be released');
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
      expect(await readdir(journal)).toEqual([]);

      s = await t.open();
      try {
        const b = await books(s, 'acct');
        expect(b.usageRecords).toBe(20);
        // Prices are per million tokens: the usage above, in micro-credits.
        expect(b.usageCredits).toBe(expected);
        expect(b.held).toBe(0n);
        expect(b.openHolds).toBe(0);
        expect(b.balance).toBe(b.grants - b.usageCredits);
        expect(b.violations).toEqual([]);
      } finally {
        await s.close();
      }
    }, 120_000);
  });
}
