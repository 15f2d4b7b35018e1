import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import type { Store } from '../../proxy/store/index.js';
import { beginAttempt, claimDeliveries, deliveriesOf, enqueueDelivery, NO_OUTCOME } from '../../proxy/webhooks/outbox.js';
import { signBody } from '../../proxy/webhooks/signing.js';
import { createDeliveryWorker } from '../../proxy/webhooks/worker.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { disposeStore, storeCases, wrapStore } from '../support/stores.js';
import { C, client, grant, startReceiver, startTasksGateway, waitUntil, type Received } from '../tasks/support.js';

const SECRET = 'whsec-delivery-test';

interface AdminTask {
  webhooks: { id: string; status: string; attempts: { attempt: number; statusCode: number | null; error: string | null }[] }[];
}

async function adminTask(gw: Gateway, id: string): Promise<AdminTask> {
  const r = await fetch(`${gw.adminUrl}/admin/v1/tasks/${id}`, { headers: { authorization: 'Bearer test-admin' } });
  expect(r.status).toBe(200);
  return (await r.json()) as AdminTask;
}

/** Every attempt carried the same bytes, the same signature (valid for them) and the same delivery id. */
function sameDelivery(received: Received[]): void {
  const first = received[0]!;
  const sig = `sha256=${createHmac('sha256', SECRET).update(first.body).digest('hex')}`;
  for (const r of received) {
    expect(r.body.equals(first.body)).toBe(true);
    expect(r.headers['x-service-signature']).toBe(sig);
    expect(r.headers['x-service-delivery']).toBe(first.headers['x-service-delivery']);
    expect(r.headers['x-service-timestamp']).toMatch(/^\d{10}$/);
  }
}

for (const sc of storeCases()) {
  describe(`webhook delivery on ${sc.name}`, () => {
    let store: Store;
    let sim: Simulator;
    let gw: Gateway;

    beforeAll(async () => {
      store = await sc.open();
      sim = await startSimulator();
      await grant(store, 'acct', 10n * C);
    });
    afterAll(async () => {
      await gw?.close();
      await sim?.close();
      if (store) await disposeStore(store);
    });

    it('retries a receiver that drops the connection, answers 503 and times out, until it answers 2xx; every attempt is recorded', async () => {
      gw = await startTasksGateway({ store, sim, settings: { webhookTimeoutMs: 400, webhookRetryScheduleS: [0.05, 0.05, 0.05, 0.05] } });
      const rx = await startReceiver((n) => (n === 1 ? 'drop' : n === 2 ? 503 : n === 3 ? 'hang' : 200));
      try {
        const sub = await client(gw.url).submit('/v1/images/generations', {
          model: 'img-openai',
          prompt: 'retry me',
          size: '64x64',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        await waitUntil(async () => (await adminTask(gw, sub.json.id)).webhooks[0]?.status === 'delivered', 15_000, 'the delivery');
        expect(rx.received).toHaveLength(4);
        sameDelivery(rx.received);
        expect(JSON.parse(rx.received[0]!.body.toString())).toMatchObject({ id: sub.json.id, status: 'succeeded' });
        const [hook] = (await adminTask(gw, sub.json.id)).webhooks;
        expect(hook!.attempts.map((a) => a.statusCode)).toEqual([null, 503, null, 200]);
        expect(hook!.attempts[0]!.error).toBeTruthy();
        expect(hook!.attempts[1]!.error).toBeNull();
        expect(hook!.attempts[2]!.error).toMatch(/timed out/);
        expect(hook!.attempts[3]!.error).toBeNull();
      } finally {
        await rx.close();
        await gw.close();
      }
    });

    it('a receiver down for its first three attempts still gets the delivery when the gateway restarts in between', async () => {
      // A stop grace: the attempt in flight when the gateway stops finishes and its 503 is recorded
      // (with none it would be cut and stay on record with no outcome, as the crash case below shows).
      const settings = { webhookRetryScheduleS: [0.3, 0.3, 0.3, 0.3], stopGraceMs: 5_000 };
      gw = await startTasksGateway({ store, sim, settings });
      const rx = await startReceiver((n) => (n <= 3 ? 503 : 200));
      try {
        const sub = await client(gw.url).submit('/v1/images/generations', {
          model: 'img-openai',
          prompt: 'restart me',
          size: '64x64',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        await waitUntil(() => rx.received.length >= 1, 10_000, 'the first attempt');
        await gw.close();
        const before = rx.received.length;
        expect(before).toBeLessThan(4);
        gw = await startTasksGateway({ store, sim, settings });
        await waitUntil(() => rx.received.length === 4, 15_000, 'the delivery after the restart');
        sameDelivery(rx.received);
        await waitUntil(async () => (await adminTask(gw, sub.json.id)).webhooks[0]?.status === 'delivered');
        const [hook] = (await adminTask(gw, sub.json.id)).webhooks;
        expect(hook!.attempts.map((a) => a.statusCode)).toEqual([503, 503, 503, 200]);
      } finally {
        await rx.close();
        await gw.close();
      }
    });

    it('an attempt cut by a crash stays on record with no outcome, and the next one gets the next number', async () => {
      const rx = await startReceiver(() => 200);
      const body = Buffer.from('{"id":"img_crash","status":"succeeded"}');
      const id = await store.tx((q) => enqueueDelivery(q, { taskId: 'img_crash', url: rx.url, body, signature: signBody(SECRET, body) }));
      // A worker claims it (a lease of 50 ms), records the attempt it is about to send, and dies.
      const [claimed] = await claimDeliveries(store, 'dying-replica', 1, 50);
      expect(claimed?.id).toBe(id);
      expect(await beginAttempt(store, claimed!, 'dying-replica', 1, new Date())).toBe(true);
      const worker = createDeliveryWorker({
        store,
        log: createLogger({}, 'silent'),
        owner: `survivor-${sc.name}`,
        policy: { allowLoopback: true, allowPrivate: false },
        retryScheduleS: [0.05],
        timeoutMs: 1000,
        intervalMs: 20,
      });
      try {
        worker.start();
        await waitUntil(async () => (await store.query("SELECT 1 FROM webhook_deliveries WHERE id = $1 AND status = 'delivered'", [id])).rows.length === 1);
      } finally {
        await worker.stop(0);
        await rx.close();
      }
      const [view] = await deliveriesOf(store, 'img_crash');
      expect(view!.attempts.map((a) => [a.attempt, a.statusCode, a.durationMs === null, a.error])).toEqual([
        [1, null, true, NO_OUTCOME],
        [2, 200, false, null],
      ]);
      expect(rx.received).toHaveLength(1);
    });

    it('an idle worker sleeps until its next retry is due instead of polling: the retry is sent on time, with no polling in between', async () => {
      // Claims (the UPDATE that leases due deliveries), timed as the store is asked.
      const claimedAt: number[] = [];
      const watched = wrapStore(store, (q) => ({
        query: (sql, params) => {
          if (sql.includes('UPDATE webhook_deliveries d SET lease_owner')) claimedAt.push(performance.now());
          return q.query(sql, params);
        },
      }));
      const at: number[] = [];
      const rx = await startReceiver((n) => {
        at.push(performance.now());
        return n === 1 ? 500 : 200;
      });
      // Polling every 250 ms, this worker would claim about 12 times in the 3 s idle below; the
      // longest it sleeps with nothing due is 8 intervals (2 s), so a retry due in 0.6 s that was
      // not waited for would go out 2 s after the failure.
      const worker = createDeliveryWorker({
        store: watched,
        log: createLogger({}, 'silent'),
        owner: `sleeper-${sc.name}`,
        policy: { allowLoopback: true, allowPrivate: false },
        retryScheduleS: [0.6],
        timeoutMs: 1000,
        intervalMs: 250,
      });
      try {
        const body = Buffer.from('{"id":"img_idle","status":"succeeded"}');
        const id = await store.tx((q) => enqueueDelivery(q, { taskId: 'img_idle', url: rx.url, body, signature: signBody(SECRET, body) }));
        worker.start();
        await waitUntil(async () => (await store.query("SELECT 1 FROM webhook_deliveries WHERE id = $1 AND status = 'delivered'", [id])).rows.length === 1);
        expect(rx.received).toHaveLength(2);
        const gap = at[1]! - at[0]!;
        expect(gap).toBeGreaterThan(550);
        expect(gap).toBeLessThan(1500);
        // Between the two attempts: the look after the first (nothing due yet), the retry's own
        // claim, and one more when the first attempt outlasted an interval (a machine under load:
        // the worker looked while the delivery was still leased). Polling would add one every 250 ms.
        expect(claimedAt.filter((t) => t > at[0]! && t < at[1]!).length).toBeLessThanOrEqual(3);
        const before = claimedAt.length;
        await new Promise((r) => setTimeout(r, 3000));
        expect(claimedAt.length - before).toBeLessThanOrEqual(3);
      } finally {
        await worker.stop(0);
        await rx.close();
      }
    });

    it('gives up at the end of the schedule, and at once on an address the guard refuses', async () => {
      const rx = await startReceiver(() => 500);
      const owner = `test-${sc.name}`;
      const worker = createDeliveryWorker({
        store,
        log: createLogger({}, 'silent'),
        owner,
        policy: { allowLoopback: false, allowPrivate: false },
        retryScheduleS: [0.05, 0.05],
        timeoutMs: 1000,
        intervalMs: 20,
      });
      try {
        const body = Buffer.from('{"id":"img_x","status":"failed"}');
        const refused = await store.tx((q) => enqueueDelivery(q, { taskId: 'img_refused', url: rx.url, body, signature: signBody(SECRET, body) }));
        worker.start();
        await waitUntil(async () => (await store.query("SELECT 1 FROM webhook_deliveries WHERE id = $1 AND status = 'failed'", [refused])).rows.length === 1);
        const a = await store.query<{ status_code: number | null; error: string }>('SELECT status_code, error FROM webhook_attempts WHERE delivery_id = $1', [
          refused,
        ]);
        expect(a.rows).toHaveLength(1);
        expect(a.rows[0]!.error).toMatch(/loopback/);
        expect(rx.received).toHaveLength(0);
      } finally {
        await worker.stop(0);
      }
      // The same receiver, allowed, failing every time: three attempts (the first and two retries), then failed.
      const allowed = createDeliveryWorker({
        store,
        log: createLogger({}, 'silent'),
        owner,
        policy: { allowLoopback: true, allowPrivate: false },
        retryScheduleS: [0.05, 0.05],
        timeoutMs: 1000,
        intervalMs: 20,
      });
      try {
        const body = Buffer.from('{"id":"img_y","status":"failed"}');
        const id = await store.tx((q) => enqueueDelivery(q, { taskId: 'img_failing', url: rx.url, body, signature: signBody(SECRET, body) }));
        allowed.start();
        await waitUntil(async () => (await store.query("SELECT 1 FROM webhook_deliveries WHERE id = $1 AND status = 'failed'", [id])).rows.length === 1);
        expect(rx.received).toHaveLength(3);
        const n = await store.query('SELECT attempt FROM webhook_attempts WHERE delivery_id = $1', [id]);
        expect(n.rows).toHaveLength(3);
      } finally {
        await allowed.stop(0);
        await rx.close();
      }
    });
  });
}
