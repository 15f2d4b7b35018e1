import { createHmac } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import type { Store } from '../../proxy/store/index.js';
import { storeCases } from '../support/stores.js';
import { C, client, startReceiver, useTasksStack, waitUntil } from './support.js';
import { videoClient, videoResources } from './videos-support.js';

/**
 * The contract's 429 / 5xx of the task endpoints: an upstream refusal while the submission is
 * being answered is the submission's status (nothing held or stored); a refusal after acceptance
 * is retried a bounded number of times, honouring retry-after, then the task fails with the
 * upstream's reason, refunded and delivered by webhook.
 */

const SECRET = 'whsec-upstream-errors';
const ATTEMPTS = 3;

async function counts(store: Store): Promise<{ tasks: number; ledger: number }> {
  const tasks = await store.query<{ n: string }>('SELECT count(*) AS n FROM tasks');
  const ledger = await store.query<{ n: string }>('SELECT count(*) AS n FROM ledger');
  return { tasks: Number(tasks.rows[0]!.n), ledger: Number(ledger.rows[0]!.n) };
}

async function ledgerKinds(store: Store, taskId: string): Promise<string[]> {
  const r = await store.query<{ kind: string }>('SELECT kind FROM ledger WHERE operation_id = $1 OR hold_id = $1 ORDER BY id', [`task:${taskId}`]);
  return r.rows.map((x) => x.kind);
}

for (const sc of storeCases()) {
  describe(`upstream 429 and 5xx on tasks, ${sc.name}`, () => {
    // Backoff may wait up to 5 s, so a retry-after of 1 s is honoured rather than cut to the cap.
    const t = useTasksStack(sc, {
      resources: videoResources,
      credits: { acct: 100n * C },
      settings: { upstreamMaxAttempts: ATTEMPTS, submitBackoffBaseMs: 30, submitBackoffMaxMs: 5_000 },
    });
    let videos: ReturnType<typeof videoClient>;
    let images: ReturnType<typeof client>;
    beforeAll(() => {
      videos = videoClient(t.gw.url);
      images = client(t.gw.url);
    });

    for (const model of ['vid-openai', 'vid-replicate']) {
      it(`a video submission refused with 429 by the upstream (${model}) is a 429 with retry-after: no task, no hold`, async () => {
        const before = { state: await accountState(t.store, 'acct'), rows: await counts(t.store) };
        const marker = `busy ${model} [sim:429]`;
        const r = await videos.submit({ model, prompt: marker });
        expect(r.status).toBe(429);
        expect(r.headers.get('retry-after')).toBe('1');
        expect(r.json.error).toMatchObject({
          type: 'rate_limit_error',
          code: 'rate_limited',
          message: expect.stringMatching(/429.*throttled|429.*Rate limit/),
        });
        expect(t.sim.recorder.find(marker)).toHaveLength(1);
        expect(await counts(t.store)).toEqual(before.rows);
        expect(await accountState(t.store, 'acct')).toEqual(before.state);
      });

      it(`a video submission answered 500 by the upstream (${model}) is a 500 in the OpenAI error shape: no task, no hold`, async () => {
        const before = await counts(t.store);
        const r = await videos.submit({ model, prompt: `broken ${model} [sim:500]` });
        expect(r.status).toBe(500);
        expect(r.headers.get('retry-after')).toBeNull();
        expect(r.json).toEqual({
          error: { type: 'api_error', code: 'upstream_error', param: null, message: expect.stringContaining('the upstream answered 500') },
        });
        expect(await counts(t.store)).toEqual(before);
      });
    }

    it('an image task the upstream keeps refusing with 429 is tried a few times, honouring retry-after, then fails rate_limited, refunded, by webhook', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        // A lower bound on the gateway's timers, which count whole milliseconds as Date.now() does (a forward
        // step of the wall clock only lengthens it); performance.now() could read a fraction short of it.
        const started = Date.now();
        const sub = await images.submit('/v1/images/generations', {
          model: 'img',
          prompt: 'crowded [sim:429]',
          n: 2,
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        expect(sub.status).toBe(200);
        const done = await images.until(sub.json.id, 20_000);
        expect(done).toMatchObject({ status: 'failed', error: { code: 'rate_limited', message: expect.stringContaining('Rate limit reached for images') } });
        // Two waits of the upstream's retry-after (1 s) between three attempts.
        expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
        expect(t.sim.recorder.find('crowded [sim:429]')).toHaveLength(ATTEMPTS);
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        const got = rx.received[0]!;
        expect(got.headers['x-service-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(got.body).digest('hex')}`);
        expect(JSON.parse(got.body.toString())).toEqual({ id: sub.json.id, status: 'failed', error: done.error });
      } finally {
        await rx.close();
      }
    });

    it('an image task the upstream answers 500 fails upstream_error after the same few attempts, without waiting for the deadline', async () => {
      const started = performance.now();
      const sub = await images.submit('/v1/images/generations', { model: 'img', prompt: 'fragile [sim:500]' });
      const done = await images.until(sub.json.id);
      expect(done).toMatchObject({ status: 'failed', error: { code: 'upstream_error', message: expect.stringContaining('had an error while processing') } });
      expect(performance.now() - started).toBeLessThan(10_000); // the deadline is 10 minutes
      expect(t.sim.recorder.find('fragile [sim:500]')).toHaveLength(ATTEMPTS);
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
    });

    it('a video whose upstream job stops answering its polls (5xx) fails upstream_error after a few polls and is refunded', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await videos.submit({ model: 'vid-replicate', prompt: 'lost in transit [sim:poll500]' });
      expect(sub.status).toBe(200);
      const done = await videos.until(sub.json.id);
      expect(done).toMatchObject({ status: 'failed', error: { code: 'upstream_error', message: expect.stringContaining('prediction status unavailable') } });
      const polls = t.sim.recorder.all().filter((r) => r.method === 'GET' && r.path.startsWith('/v1/predictions/'));
      expect(polls.length).toBe(ATTEMPTS);
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}
