import { createHmac, timingSafeEqual } from 'node:crypto';
import OpenAI from 'openai';
import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import type { Store } from '../../proxy/store/index.js';
import { storeCases } from '../support/stores.js';
import { C, client, KEY, OTHER_KEY, startReceiver, startTasksGateway, useTasksStack, waitUntil, type Received } from './support.js';

const SECRET = 'whsec-test-секрет'; // non-ASCII on purpose: the HMAC key is the UTF-8 bytes

/** Width and height from the IHDR of a PNG, checked independently of the simulator's encoder. */
function pngSize(b: Buffer): { width: number; height: number } {
  expect(b.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(b.toString('latin1', 12, 16)).toBe('IHDR');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

/** What a receiver does: HMAC over the raw bytes it got, constant-time compared with the header. */
function verified(r: Received, secret = SECRET): boolean {
  const want = Buffer.from(`sha256=${createHmac('sha256', secret).update(r.body).digest('hex')}`);
  const got = Buffer.from(String(r.headers['x-service-signature'] ?? ''));
  return got.length === want.length && timingSafeEqual(got, want);
}

async function ledgerKinds(store: Store, taskId: string): Promise<string[]> {
  const r = await store.query<{ kind: string }>('SELECT kind FROM ledger WHERE operation_id = $1 OR hold_id = $1 ORDER BY id', [`task:${taskId}`]);
  return r.rows.map((x) => x.kind);
}

for (const sc of storeCases()) {
  describe(`image tasks on ${sc.name}`, () => {
    const t = useTasksStack(sc, { credits: { acct: 100n * C, 'other-acct': 10n * C } });
    let c: ReturnType<typeof client>;
    beforeAll(() => {
      c = client(t.gw.url);
    });

    it('submit -> queued -> poll -> succeeded with fetchable PNGs of the size asked; charged n x the tier price', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit('/v1/images/generations', { model: 'img-openai', prompt: 'a lighthouse', n: 2, size: '320x200' });
      expect(sub.status).toBe(200);
      expect(sub.json).toEqual({ id: expect.stringMatching(/^img_/), status: 'queued', created: expect.any(Number) });
      const done = await c.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      expect(done.data).toHaveLength(2);
      for (const { url } of done.data!) {
        const f = await fetch(url); // no key: the signature is the credential
        expect(f.status).toBe(200);
        expect(f.headers.get('content-type')).toBe('image/png');
        expect(pngSize(Buffer.from(await f.arrayBuffer()))).toEqual({ width: 320, height: 200 });
      }
      // 320x200 is 1K: 2 x 0.02 credits, and nothing left held.
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 40_000n, held: before.held });
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'capture']);

      // A result URL is only good with its own signature.
      const tampered = done.data![0]!.url.replace(/expires=(\d+)/, (_, e: string) => `expires=${Number(e) + 1}`);
      expect((await fetch(tampered)).status).toBe(403);
      expect((await fetch(done.data![0]!.url.replace(/\?.*$/, ''))).status).toBe(404);
    });

    it('an asynchronous (Replicate-style) upstream is polled; a tier inferred from pixels sets the price', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit('/v1/images/generations', { model: 'img-replicate', prompt: 'a harbour [sim:slow=150]', size: '2048x1152' });
      expect(sub.status).toBe(200);
      const done = await c.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      const png = Buffer.from(await (await fetch(done.data![0]!.url)).arrayBuffer());
      expect(pngSize(png)).toEqual({ width: 2048, height: 1152 });
      const created = JSON.parse(t.sim.recorder.find('a harbour')[0]!.body.toString()) as { input: Record<string, unknown> };
      expect(created.input).toMatchObject({
        prompt: 'a harbour [sim:slow=150]',
        num_outputs: 1,
        width: 2048,
        height: 1152,
        resolution: '2K',
        aspect_ratio: '16:9',
      });
      expect(t.sim.recorder.all().filter((r) => r.method === 'GET' && r.path.startsWith('/v1/predictions/')).length).toBeGreaterThan(0);
      expect((await accountState(t.store, 'acct')).balance).toBe(before.balance - 40_000n); // 2K
    });

    it("a ratio at a tier gets the tier's side on its longer edge", async () => {
      const done = await c.until((await c.submit('/v1/images/generations', { model: 'img-openai', prompt: 'tall', size: '9:16', resolution: '2K' })).json.id);
      expect(pngSize(Buffer.from(await (await fetch(done.data![0]!.url)).arrayBuffer()))).toEqual({ width: 1152, height: 2048 });
      expect(JSON.parse(t.sim.recorder.find('"tall"')[0]!.body.toString())).toMatchObject({ size: '1152x2048', n: 1 });
    });

    it('a signed webhook on success: the receiver verifies the signature over the raw bytes with its own HMAC', async () => {
      const rx = await startReceiver();
      try {
        const sub = await c.submit('/v1/images/generations', {
          model: 'img-openai',
          prompt: 'a fox',
          size: '64x64',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        const got = rx.received[0]!;
        expect(got.headers['content-type']).toBe('application/json');
        expect(verified(got)).toBe(true);
        expect(verified(got, 'another secret')).toBe(false);
        expect(Math.abs(Number(got.headers['x-service-timestamp']) - Date.now() / 1000)).toBeLessThan(120);
        expect(got.headers['x-service-delivery']).toMatch(/^whd_/);
        const body = JSON.parse(got.body.toString()) as { id: string; status: string; data: { url: string }[] };
        expect(body).toEqual({ id: sub.json.id, status: 'succeeded', data: [{ url: expect.any(String) }] });
        expect((await fetch(body.data[0]!.url)).status).toBe(200);
        // The secret left the task row with the terminal transition.
        const r = await t.store.query<{ webhook_secret: string | null }>('SELECT webhook_secret FROM tasks WHERE id = $1', [sub.json.id]);
        expect(r.rows[0]!.webhook_secret).toBeNull();
      } finally {
        await rx.close();
      }
    });

    it('an upstream failure fails the task, refunds exactly once and delivers a signed failed webhook', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await c.submit('/v1/images/generations', {
          model: 'img-openai',
          prompt: 'forbidden [sim:fail]',
          n: 3,
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        const done = await c.until(sub.json.id);
        expect(done).toMatchObject({
          status: 'failed',
          error: { code: 'content_blocked', message: expect.stringMatching(/content_policy_violation.*safety system/) },
        });
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: sub.json.id, status: 'failed', error: done.error });
        // A later cancel cannot end it a second time, and says it is no use retrying: the
        // official SDK, which retries a 409 twice by default, asks once.
        const again = await c.cancel(sub.json.id);
        expect([again.status, again.headers.get('x-should-retry')]).toEqual([409, 'false']);
        let asked = 0;
        const sdk = new OpenAI({ baseURL: `${t.gw.url}/v1`, apiKey: KEY, fetch: (url, init) => (asked++, fetch(url, init)) });
        await expect(sdk.post(`/images/generations/${sub.json.id}/cancel`)).rejects.toMatchObject({ status: 409 });
        expect(asked).toBe(1);
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
        expect(rx.received).toHaveLength(1);
      } finally {
        await rx.close();
      }
    });

    it('edits and inpaint download the inputs and upload them to OpenAI as multipart files', async () => {
      const src = await c.until((await c.submit('/v1/images/generations', { model: 'img-openai', prompt: 'source', n: 2, size: '96x64' })).json.id);
      const [image, mask] = src.data!.map((d) => d.url) as [string, string];
      const imageBytes = Buffer.from(await (await fetch(image)).arrayBuffer());
      const maskBytes = Buffer.from(await (await fetch(mask)).arrayBuffer());

      const edit = await c.until((await c.submit('/v1/images/edits', { model: 'img-openai', prompt: 'edit-marker', image })).json.id);
      expect(edit.status).toBe('succeeded');
      const inpaint = await c.until(
        (await c.submit('/v1/images/inpaint', { model: 'img-openai', prompt: 'inpaint-marker', image_urls: [image], mask_url: mask, size: '96x64' })).json.id,
      );
      expect(inpaint.status).toBe('succeeded');
      expect(pngSize(Buffer.from(await (await fetch(inpaint.data![0]!.url)).arrayBuffer()))).toEqual({ width: 96, height: 64 });

      const up = t.sim.recorder.find('inpaint-marker')[0]!;
      expect(up.path).toBe('/v1/images/edits');
      expect(up.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
      expect(Number(up.headers['content-length'])).toBe(up.body.length);
      expect(up.body.includes(imageBytes)).toBe(true);
      expect(up.body.includes(maskBytes)).toBe(true);
      expect(up.body.toString('latin1')).toMatch(/name="mask"; filename="1\.png"/);
      expect(t.sim.recorder.find('edit-marker')[0]!.body.toString('latin1')).not.toMatch(/name="mask"/);
    });

    it('an Idempotency-Key resubmission returns the original task and holds nothing more', async () => {
      const key = `idem-${Date.now()}`;
      const body = { model: 'img-openai', prompt: 'once only [sim:slow=300]', size: '64x64' };
      const [a, b] = await Promise.all([
        c.submit('/v1/images/generations', body, { 'idempotency-key': key }),
        c.submit('/v1/images/generations', body, { 'idempotency-key': key }),
      ]);
      expect(a.status).toBe(200);
      expect(b.status).toBe(200);
      expect(b.json.id).toBe(a.json.id);
      const third = await c.submit('/v1/images/generations', { prompt: body.prompt, size: '64x64', model: 'img-openai' }, { 'idempotency-key': key });
      expect(third.json.id).toBe(a.json.id);
      expect(third.headers.get('idempotent-replayed')).toBe('true');
      const changed = await c.submit('/v1/images/generations', { ...body, prompt: 'something else' }, { 'idempotency-key': key });
      expect(changed.status).toBe(400);
      expect(changed.json.error.param).toBe('Idempotency-Key');
      await c.until(a.json.id);
      const holds = await t.store.query("SELECT 1 FROM ledger WHERE kind = 'hold' AND meta->>'task' IN (SELECT id FROM tasks WHERE idempotency_key = $1)", [
        key,
      ]);
      expect(holds.rows).toHaveLength(1);
      // Another key's Idempotency-Key space is its own.
      const other = client(t.gw.url, OTHER_KEY);
      const mine = await other.submit('/v1/images/generations', body, { 'idempotency-key': key });
      expect(mine.json.id).not.toBe(a.json.id);
      await other.until(mine.json.id);
    });

    it('cancel stops an unfinished task upstream, refunds it and delivers a cancelled webhook', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await c.submit('/v1/images/generations', {
          model: 'img-replicate',
          prompt: 'long one [sim:slow=20000]',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        // Wait until the prediction exists upstream, so the cancel has something to stop.
        await waitUntil(() => t.sim.recorder.find('long one').length === 1, 10_000, 'the prediction');
        await waitUntil(async () => (await t.store.query('SELECT 1 FROM tasks WHERE id = $1 AND upstream_id IS NOT NULL', [sub.json.id])).rows.length === 1);
        const cancelled = await c.cancel(sub.json.id);
        expect(cancelled.status).toBe(200);
        expect(cancelled.json).toMatchObject({ id: sub.json.id, status: 'cancelled', error: { code: 'cancelled' } });
        expect(t.sim.recorder.all().some((r) => r.method === 'POST' && /^\/v1\/predictions\/[^/]+\/cancel$/.test(r.path))).toBe(true);
        expect((await c.cancel(sub.json.id)).json.status).toBe('cancelled'); // again: the same answer
        expect((await c.get(sub.json.id)).json.status).toBe('cancelled');
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toMatchObject({ id: sub.json.id, status: 'cancelled' });
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
      } finally {
        await rx.close();
      }
    });

    it("another key's task reads as 404, for GET and cancel alike", async () => {
      const sub = await c.submit('/v1/images/generations', { model: 'img-openai', prompt: 'mine', size: '64x64' });
      const other = client(t.gw.url, OTHER_KEY);
      for (const r of [await other.get(sub.json.id), await other.cancel(sub.json.id), await other.get('img_doesnotexist')]) {
        expect(r.status).toBe(404);
        expect(r.json.error.type).toBe('invalid_request_error');
      }
      expect((await c.until(sub.json.id)).status).toBe('succeeded');
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}
