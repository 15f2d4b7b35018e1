import { createHmac, timingSafeEqual } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import type { Store } from '../../proxy/store/index.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { disposeStore, storeCases } from '../support/stores.js';
import { C, grant, OTHER_KEY, startReceiver, startTasksGateway, useTasksStack, waitUntil, type Received } from './support.js';
import { AUDIO, LIMITED, mp4Boxes, P1080, P720, POOR, videoClient, videoResources } from './videos-support.js';

const SECRET = 'whsec-video-test';
const FRAME = 'https://media.example.com/first.png';
const LAST = 'https://media.example.com/last.png';
const REF = 'https://media.example.com/ref.png';
const CLIP = 'https://media.example.com/clip.mp4';

function verified(r: Received): boolean {
  const want = Buffer.from(`sha256=${createHmac('sha256', SECRET).update(r.body).digest('hex')}`);
  const got = Buffer.from(String(r.headers['x-service-signature'] ?? ''));
  return got.length === want.length && timingSafeEqual(got, want);
}

async function ledgerKinds(store: Store, taskId: string): Promise<string[]> {
  const r = await store.query<{ kind: string }>('SELECT kind FROM ledger WHERE operation_id = $1 OR hold_id = $1 ORDER BY id', [`task:${taskId}`]);
  return r.rows.map((x) => x.kind);
}

const upstreamBody = (sim: Simulator, marker: string) => JSON.parse(sim.recorder.find(marker)[0]!.body.toString()) as Record<string, unknown>;

for (const sc of storeCases()) {
  describe(`video tasks on ${sc.name}`, () => {
    const t = useTasksStack(sc, { resources: videoResources, credits: { acct: 100n * C, 'other-acct': 10n * C, poor: 100_000n } });
    let c: ReturnType<typeof videoClient>;
    beforeAll(() => {
      c = videoClient(t.gw.url);
    });

    it('text-to-video: answers processing, polls OpenAI, stores a real MP4, charges duration x (resolution + audio), signs the webhook', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await c.submit({ model: 'vid-openai', prompt: 'a lighthouse at dusk', webhook_url: rx.url, webhook_secret: SECRET });
        expect(sub.status).toBe(200);
        expect(sub.json).toEqual({ id: expect.stringMatching(/^vid_/), status: 'processing', created: expect.any(Number) });
        // Defaults: 5 s, 720p, 16:9, with audio: held 5 x (0.10 + 0.02).
        expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance, held: before.held + 5n * (P720 + AUDIO) });
        const done = await c.until(sub.json.id);
        expect(done).toMatchObject({ status: 'succeeded', mode: 'text-to-video', data: [{ url: expect.any(String) }] });
        expect(done.ignored).toBeUndefined();
        expect(upstreamBody(t.sim, 'a lighthouse at dusk')).toEqual({ model: 'video-sim', prompt: 'a lighthouse at dusk', seconds: '5', size: '1280x720' });

        const f = await fetch(done.data![0]!.url);
        expect(f.status).toBe(200);
        expect(f.headers.get('content-type')).toBe('video/mp4');
        expect(mp4Boxes(Buffer.from(await f.arrayBuffer()))).toEqual({ types: ['ftyp', 'mdat', 'moov'], seconds: 5 });

        expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 5n * (P720 + AUDIO), held: before.held });
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'capture']);

        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: sub.json.id, status: 'succeeded', data: [{ url: expect.any(String) }] });
      } finally {
        await rx.close();
      }
    });

    it('image-to-video and video-to-video reach a Replicate-style upstream with every input, under either name', async () => {
      const i2v = await c.submit({
        model: 'vid-replicate',
        prompt: 'i2v-marker',
        first_frame_url: FRAME,
        last_frame_url: LAST,
        reference_images: [REF],
        duration: 6,
        resolution: '1080p',
        aspect_ratio: '9:16',
        generate_audio: false,
      });
      expect(i2v.status).toBe(200);
      const v2v = await c.submit({ model: 'vid-replicate', prompt: 'v2v-marker', video_url: CLIP, image_url: FRAME, reference_video_url: CLIP });
      expect(v2v.status).toBe(200);
      const [a, b] = await Promise.all([c.until(i2v.json.id), c.until(v2v.json.id)]);
      expect(a).toMatchObject({ status: 'succeeded', mode: 'image-to-video' });
      expect(b).toMatchObject({ status: 'succeeded', mode: 'video-to-video' });
      expect(upstreamBody(t.sim, 'i2v-marker').input).toEqual({
        prompt: 'i2v-marker',
        duration: 6,
        resolution: '1080p',
        aspect_ratio: '9:16',
        generate_audio: false,
        image: FRAME,
        last_frame: LAST,
        reference_images: [REF],
      });
      expect(upstreamBody(t.sim, 'v2v-marker').input).toEqual({
        prompt: 'v2v-marker',
        duration: 5,
        resolution: '720p',
        aspect_ratio: '16:9',
        generate_audio: true,
        image: FRAME,
        video: CLIP,
      });
      // 1080p without audio, for the full 6 s (the file says 6 s: Replicate reports no duration).
      const charged = await t.store.query<{ charged_micro: string }>('SELECT charged_micro FROM tasks WHERE id = $1', [i2v.json.id]);
      expect(BigInt(charged.rows[0]!.charged_micro)).toBe(6n * P1080);
    });

    it('image-to-video on OpenAI sends the first frame as input_reference; what the API cannot take is listed as ignored', async () => {
      const sub = await c.submit({
        model: 'vid-openai',
        prompt: 'oai-i2v-marker',
        image_url: FRAME,
        last_image_url: LAST,
        duration: 8,
        aspect_ratio: '9:16',
        resolution: '480p',
      });
      const done = await c.until(sub.json.id);
      expect(done).toMatchObject({ status: 'succeeded', mode: 'image-to-video', ignored: ['last_image_url'] });
      expect(upstreamBody(t.sim, 'oai-i2v-marker')).toEqual({
        model: 'video-sim',
        prompt: 'oai-i2v-marker',
        seconds: '8',
        size: '480x854',
        input_reference: { image_url: FRAME },
      });
    });

    it('inputs the model does not offer are dropped before the upstream call, listed as ignored and not paid for', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit({ model: 'vid-plain', prompt: 'plain-marker', image_url: FRAME, reference_video_url: CLIP, generate_audio: true, seed: 7 });
      expect(sub.status).toBe(200);
      const done = await c.until(sub.json.id);
      // The mode is what was asked; the inputs never left the gateway.
      expect(done).toMatchObject({ status: 'succeeded', mode: 'video-to-video', ignored: ['generate_audio', 'image_url', 'reference_video_url', 'seed'] });
      expect(upstreamBody(t.sim, 'plain-marker')).toEqual({ model: 'video-sim', prompt: 'plain-marker', seconds: '5', size: '1280x720' });
      expect((await accountState(t.store, 'acct')).balance).toBe(before.balance - 5n * P720); // no audio
    });

    it('Sora: a duration it does not take is sent as the longest it takes below it, and the shorter video is what is charged', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit({ model: 'vid-sora', prompt: 'sora-marker', duration: 10, aspect_ratio: '9:16', generate_audio: false });
      const done = await c.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      expect(upstreamBody(t.sim, 'sora-marker')).toMatchObject({ model: 'sora-2', seconds: '8', size: '720x1280' });
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 8n * P720, held: before.held });
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'capture']);
    });

    it('settles on the actual duration the upstream reports, shorter than asked: the rest of the hold is released', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit({ model: 'vid-openai', prompt: 'short one [sim:short]', duration: 8, resolution: '1080p' });
      // Held for 8 s of 1080p with audio...
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance, held: before.held + 8n * (P1080 + AUDIO) });
      const done = await c.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      expect(mp4Boxes(Buffer.from(await (await fetch(done.data![0]!.url)).arrayBuffer())).seconds).toBe(6);
      // ...charged for the 6 s delivered, to the micro-credit, and nothing left held.
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 6n * (P1080 + AUDIO), held: before.held });
    });

    it('an upstream that reports no duration is charged on the duration the MP4 says, pro rata (Replicate, 5 s asked, 3.75 s made)', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit({ model: 'vid-replicate', prompt: 'measured [sim:short]' });
      const done = await c.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - (375n * (P720 + AUDIO)) / 100n, held: before.held });
      const usage = await t.store.query<{ usage: unknown }>('SELECT usage FROM tasks WHERE id = $1', [sub.json.id]);
      const u = typeof usage.rows[0]!.usage === 'string' ? JSON.parse(usage.rows[0]!.usage) : usage.rows[0]!.usage;
      expect(u).toMatchObject({ seconds: 3.75 });
      expect(u).not.toHaveProperty('images');
    });

    it('an upstream failure refunds everything, exactly once, and delivers a signed failed webhook', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await c.submit({ model: 'vid-openai', prompt: 'doomed [sim:fail]', duration: 12, webhook_url: rx.url, webhook_secret: SECRET });
        expect(sub.status).toBe(200);
        const done = await c.until(sub.json.id);
        expect(done).toMatchObject({
          status: 'failed',
          error: { code: 'video_generation_failed', message: expect.stringContaining('could not be generated') },
        });
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: sub.json.id, status: 'failed', error: done.error });
        expect((await c.cancel(sub.json.id)).status).toBe(409);
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
      } finally {
        await rx.close();
      }
    });

    it('content blocked by the safety policy at submission is a 400: no task, no hold, no webhook', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const tasks = (await t.store.query('SELECT id FROM tasks')).rows.length;
        const ledger = (await t.store.query('SELECT id FROM ledger')).rows.length;
        const r = await c.submit(
          { model: 'vid-openai', prompt: 'forbidden [sim:blocked]', webhook_url: rx.url, webhook_secret: SECRET },
          { 'idempotency-key': 'blocked-1' },
        );
        expect(r.status).toBe(400);
        expect(r.json.error).toMatchObject({
          type: 'invalid_request_error',
          code: 'invalid_request',
          param: 'prompt',
          message: expect.stringMatching(/safety policy.*moderation/),
        });
        expect(t.sim.recorder.find('forbidden [sim:blocked]')).toHaveLength(1); // the upstream was asked, once
        expect((await t.store.query('SELECT id FROM tasks')).rows).toHaveLength(tasks);
        expect((await t.store.query('SELECT id FROM ledger')).rows).toHaveLength(ledger);
        expect(await accountState(t.store, 'acct')).toEqual(before);
        await new Promise((res) => setTimeout(res, 200));
        expect(rx.received).toEqual([]);
      } finally {
        await rx.close();
      }
    });

    it('content flagged after acceptance (Replicate) fails the task with content_blocked and refunds it', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit({ model: 'vid-replicate', prompt: 'flagged later [sim:blocked]' });
      expect(sub.status).toBe(200);
      const done = await c.until(sub.json.id);
      expect(done).toMatchObject({ status: 'failed', error: { code: 'content_blocked', message: expect.stringContaining('E005') } });
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('cancel refunds an unfinished video and delivers a cancelled webhook; another key sees 404', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await c.submit({ model: 'vid-replicate', prompt: 'long take [sim:slow=20000]', webhook_url: rx.url, webhook_secret: SECRET });
        expect(sub.status).toBe(200);
        const other = videoClient(t.gw.url, OTHER_KEY);
        expect((await other.get(sub.json.id)).status).toBe(404);
        expect((await other.cancel(sub.json.id)).status).toBe(404);
        // An image task id on the video path is not found either.
        expect((await c.get(sub.json.id.replace(/^vid_/, 'img_'))).status).toBe(404);
        const cancelled = await c.cancel(sub.json.id);
        expect(cancelled.status).toBe(200);
        expect(cancelled.json).toMatchObject({ id: sub.json.id, status: 'cancelled', error: { code: 'cancelled' } });
        expect(t.sim.recorder.all().some((r) => r.method === 'POST' && /^\/v1\/predictions\/[^/]+\/cancel$/.test(r.path))).toBe(true);
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toMatchObject({ id: sub.json.id, status: 'cancelled' });
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
      } finally {
        await rx.close();
      }
    });

    it('an Idempotency-Key resubmission answers the same task: one upstream job, one hold', async () => {
      const key = `vid-idem-${sc.name}`;
      const body = { model: 'vid-openai', prompt: `idem-marker-${sc.name}`, duration: 4 };
      const a = await c.submit(body, { 'idempotency-key': key });
      const b = await c.submit({ duration: 4, prompt: body.prompt, model: 'vid-openai' }, { 'idempotency-key': key });
      expect(a.status).toBe(200);
      expect(b.json.id).toBe(a.json.id);
      expect(b.headers.get('idempotent-replayed')).toBe('true');
      const changed = await c.submit({ ...body, duration: 5 }, { 'idempotency-key': key });
      expect(changed.status).toBe(400);
      expect(changed.json.error.param).toBe('Idempotency-Key');
      await c.until(a.json.id);
      expect(t.sim.recorder.find(body.prompt).filter((r) => r.path === '/v1/videos')).toHaveLength(1);
      expect(await ledgerKinds(t.store, a.json.id)).toEqual(['hold', 'capture']);
    });

    it('an account that cannot pay gets 402 before any upstream work', async () => {
      const r = await videoClient(t.gw.url, POOR).submit({ model: 'vid-openai', prompt: 'poor-marker' });
      expect(r.status).toBe(402);
      expect(r.json.error.type).toBe('insufficient_quota');
      expect(t.sim.recorder.find('poor-marker')).toEqual([]);
      expect(await accountState(t.store, 'poor')).toEqual({ balance: 100_000n, held: 0n });
    });

    it("a key's spend limit is checked before any upstream work too", async () => {
      const before = await accountState(t.store, 'acct');
      const r = await videoClient(t.gw.url, LIMITED).submit({ model: 'vid-openai', prompt: 'limited-marker' }); // 0.6 credits > 0.5
      expect(r.status).toBe(402);
      expect(r.json.error.code).toBe('spend_limit_reached');
      expect(t.sim.recorder.find('limited-marker')).toEqual([]);
      expect(await accountState(t.store, 'acct')).toEqual(before);
      const ok = await videoClient(t.gw.url, LIMITED).submit({ model: 'vid-openai', prompt: 'limited-ok', duration: 4, generate_audio: false }); // 0.4
      expect(ok.status).toBe(200);
      expect((await videoClient(t.gw.url, LIMITED).until(ok.json.id)).status).toBe('succeeded');
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}

for (const sc of storeCases()) {
  describe(`video tasks across a restart on ${sc.name}`, () => {
    it('a video accepted by one gateway is polled to the end by the next, from the upstream job recorded at submission', async () => {
      const store = await sc.open();
      const sim = await startSimulator();
      try {
        await grant(store, 'acct', 10n * C);
        const first = await startTasksGateway({ store, sim, resources: videoResources });
        const sub = await videoClient(first.url).submit({ model: 'vid-openai', prompt: 'restart-marker [sim:slow=800]', duration: 4 });
        expect(sub.status).toBe(200);
        await first.close();
        const row = await store.query<{ upstream_id: string | null; status: string }>('SELECT upstream_id, status FROM tasks WHERE id = $1', [sub.json.id]);
        expect(row.rows[0]).toMatchObject({ upstream_id: expect.stringMatching(/^video_/), status: 'processing' });

        const second = await startTasksGateway({ store, sim, resources: videoResources });
        try {
          const done = await videoClient(second.url).until(sub.json.id);
          expect(done.status).toBe('succeeded');
          expect(sim.recorder.find('restart-marker').filter((r) => r.path === '/v1/videos')).toHaveLength(1);
          expect(await accountState(store, 'acct')).toEqual({ balance: 10n * C - 4n * (P720 + AUDIO), held: 0n });
        } finally {
          await second.close();
        }
      } finally {
        await sim.close();
        await disposeStore(store);
      }
    });
  });
}
