import { describe, expect, it } from 'vitest';
import { accountState, keySpent, verifyLedger } from '../../proxy/billing/ledger.js';
import { hashKey } from '../../proxy/auth/keys.js';
import { apiKey, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { C, client, imageRoute, useTasksStack } from '../tasks/support.js';

/** spendLimit covers image tasks too: open task holds and captured tasks count towards it. */
const LIMITED = 'sk-service-billing-task-limit';

for (const sc of storeCases()) {
  describe(`task holds and the key's spend limit on ${sc.name}`, () => {
    const t = useTasksStack(sc, {
      // 0.02 credits an image; the key may spend 0.05.
      resources: (url) => [
        imageRoute('img', 'openai', `${url}/v1`, { model: 'image-sim' }),
        group('g', ['img']),
        apiKey('lim', LIMITED, 'g', { account: 'acct', spendLimit: '0.05' }),
      ],
      credits: { acct: 10n * C },
    });

    it('admits tasks while spend + open holds fit the limit, then 402 spend_limit_reached with nothing held or stored', async () => {
      const c = client(t.gw.url, LIMITED);
      const a = await c.submit('/v1/images/generations', { model: 'img', prompt: 'one', size: '64x64', n: 2 });
      expect(a.status).toBe(200);
      expect((await c.until(a.json.id)).status).toBe('succeeded');
      expect(await keySpent(t.store, hashKey(LIMITED))).toBe(40_000n);
      const refused = await c.submit('/v1/images/generations', { model: 'img', prompt: 'two', size: '64x64', n: 1 });
      expect(refused.status).toBe(402);
      expect(refused.json.error).toMatchObject({ code: 'spend_limit_reached', type: 'insufficient_quota' });
      expect(t.sim.recorder.find('two')).toHaveLength(0);
      const tasks = await t.store.query('SELECT id FROM tasks');
      expect(tasks.rows).toHaveLength(1);
      expect(await accountState(t.store, 'acct')).toEqual({ balance: 10n * C - 40_000n, held: 0n });
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}
