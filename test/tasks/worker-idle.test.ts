import { describe, expect, it } from 'vitest';
import type { Store } from '../../proxy/store/index.js';
import { startSimulator } from '../../simulator/index.js';
import { disposeStore, storeCases, wrapStore } from '../support/stores.js';
import { C, grant, startTasksGateway } from './support.js';
import { videoClient, videoResources } from './videos-support.js';

/** The store, counting the task worker's claims (the UPDATE that leases due tasks). */
function counting(store: Store): { store: Store; claims: () => number } {
  let claims = 0;
  const watched = wrapStore(store, (q) => ({
    query: (sql, params) => {
      if (sql.includes('UPDATE tasks t SET lease_owner')) claims++;
      return q.query(sql, params);
    },
  }));
  return { store: watched, claims: () => claims };
}

for (const sc of storeCases()) {
  describe(`the task worker when nothing is due, on ${sc.name}`, () => {
    it('sleeps until the next poll is due instead of polling the store: a video still finishes on time, and an idle worker hardly claims', async () => {
      const store = await sc.open();
      const sim = await startSimulator();
      const c = counting(store);
      // Looking every 500 ms, the worker sleeps up to 8 intervals (4 s) when nothing is due: a
      // task whose upstream polls (every 300 ms) were not waited for would be polled 4 s apart.
      const gw = await startTasksGateway({
        store: c.store,
        sim,
        resources: videoResources,
        settings: { pollIntervalMs: 300 },
        options: { workerIntervalMs: 500 },
      });
      try {
        await grant(store, 'acct', 10n * C);
        const t0 = performance.now();
        const sub = await videoClient(gw.url).submit({ model: 'vid-openai', prompt: 'on time [sim:slow=500]', duration: 4 });
        expect(sub.status).toBe(200);
        const done = await videoClient(gw.url).until(sub.json.id);
        expect(done.status).toBe('succeeded');
        // 0.7-0.8 s when each poll goes out as it comes due; 4.1 s when the worker sleeps its longest.
        expect(performance.now() - t0).toBeLessThan(3000);
        // Polling every 500 ms would claim 6 times in 3 s.
        const before = c.claims();
        await new Promise((r) => setTimeout(r, 3000));
        expect(c.claims() - before).toBeLessThanOrEqual(1);
      } finally {
        await gw.close();
        await sim.close();
        await disposeStore(store);
      }
    });
  });
}
