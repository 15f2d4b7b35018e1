import { describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { storeCases } from '../support/stores.js';
import { grant, useTasksStack } from './support.js';
import { AUDIO, P720, videoClient, videoResources } from './videos-support.js';

/** One 4 s video at 720p with audio. */
const PRICE = 4n * (P720 + AUDIO);

for (const sc of storeCases()) {
  describe(`task admission in group commits on ${sc.name}`, () => {
    const t = useTasksStack(sc, { resources: videoResources });

    it('a burst from one account is accepted exactly up to its credits; the rest get 402 and leave nothing', async () => {
      await grant(t.store, 'acct', 30n * PRICE);
      const c = videoClient(t.gw.url);
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) => c.submit({ model: 'vid-openai', prompt: `burst ${i} [sim:slow=60000]`, duration: 4 })),
      );
      const accepted = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status === 402);
      expect(accepted).toHaveLength(30);
      expect(refused).toHaveLength(20);
      expect(new Set(accepted.map((a) => a.json.id)).size).toBe(30);
      expect(await accountState(t.store, 'acct')).toEqual({ balance: 30n * PRICE, held: 30n * PRICE });
      expect((await t.store.query("SELECT id FROM tasks WHERE account = 'acct'")).rows).toHaveLength(30);
      expect(await verifyLedger(t.store)).toEqual([]);
      // Cancelling them all hands every hold back.
      for (const a of accepted) expect((await c.cancel(a.json.id)).status).toBe(200);
      expect(await accountState(t.store, 'acct')).toEqual({ balance: 30n * PRICE, held: 0n });
    });

    it('a burst of retries under one Idempotency-Key makes one task, one hold and one upstream job', async () => {
      await grant(t.store, 'other-acct', 10n * PRICE);
      const c = videoClient(t.gw.url, 'sk-service-tasks-other');
      const body = { model: 'vid-openai', prompt: 'once [sim:slow=60000]', duration: 4 };
      const answers = await Promise.all(Array.from({ length: 12 }, () => c.submit(body, { 'idempotency-key': `burst-${sc.name}` })));
      expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
      expect(new Set(answers.map((a) => a.json.id)).size).toBe(1);
      expect(await accountState(t.store, 'other-acct')).toEqual({ balance: 10n * PRICE, held: PRICE });
      // ...and one upstream job: the retries waited for the first instead of starting their own.
      expect(t.sim.recorder.find('once [sim:slow=60000]').filter((r) => r.path === '/v1/videos')).toHaveLength(1);
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}
