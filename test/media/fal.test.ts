import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { startSimulator } from '../../simulator/index.js';
import { apiKey, group } from '../support/resources.js';
import { disposeStore, storeCases } from '../support/stores.js';
import { C, client, grant, KEY, startReceiver, waitUntil } from '../tasks/support.js';
import { mp4Boxes, videoClient } from '../tasks/videos-support.js';
import {
  AUDIO,
  chargedOf,
  IMG_1K,
  ledgerKinds,
  mediaRoute,
  P1080,
  P720,
  pngDims,
  SECRET,
  startMediaGateway,
  upstreamBody,
  useMediaStack,
  verified,
} from './support.js';

const FRAME = 'https://media.example.com/first.png';
const LAST = 'https://media.example.com/last.png';
const REF = 'https://media.example.com/ref.png';
const CLIP = 'https://media.example.com/clip.mp4';
const KLING = 'fal-ai/kling-video/v2.1/pro/image-to-video';

const fal = (s: string, model: string) => ({ provider: 'fal', baseURL: `${s}/fal`, model, credentials: { env: 'FAL_KEY' } });

function resources(s: string): object[] {
  return [
    mediaRoute('kling', 'video', fal(s, KLING)),
    mediaRoute('wan', 'video', fal(s, 'fal-ai/wan/v2.2-a14b/video-to-video')),
    mediaRoute('seedance', 'video', fal(s, 'fal-ai/bytedance/seedance/v1/pro/image-to-video')),
    mediaRoute('flux', 'image', fal(s, 'fal-ai/flux/dev')),
    mediaRoute('flux-fill', 'image', fal(s, 'fal-ai/flux-pro/v1/fill')),
    group('g', ['kling', 'wan', 'seedance', 'flux', 'flux-fill']),
    apiKey('k', KEY, 'g', { account: 'acct' }),
  ];
}

const statusPath = /^\/fal\/fal-ai\/kling-video\/requests\/[0-9a-f-]{36}\/status$/;

for (const sc of storeCases()) {
  describe(`fal.ai queue tasks on ${sc.name}`, () => {
    const t = useMediaStack(sc, resources, { acct: 100n * C });
    let v: ReturnType<typeof videoClient>;
    let img: ReturnType<typeof client>;
    beforeAll(() => {
      v = videoClient(t.gw.url);
      img = client(t.gw.url);
    });

    it('image-to-video on Kling: queued with the family field names and Key auth, polled, copied, charged on the seconds the file holds, webhook signed', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await v.submit({
          model: 'kling',
          prompt: 'kling-marker [sim:short]',
          image_url: FRAME,
          last_frame_url: LAST,
          reference_images: [REF],
          duration: 10,
          resolution: '1080p',
          aspect_ratio: '9:16',
          negative_prompt: 'blur',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        expect(sub.status).toBe(200);
        expect(sub.json).toEqual({ id: expect.stringMatching(/^vid_/), status: 'processing', created: expect.any(Number) });
        expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance, held: before.held + 10n * (P1080 + AUDIO) });

        const submitted = t.sim.recorder.find('kling-marker');
        expect(submitted).toHaveLength(1);
        expect(submitted[0]!.path).toBe(`/fal/${KLING}`);
        expect(submitted[0]!.headers.authorization).toBe('Key sim-fal-key');
        expect(JSON.parse(submitted[0]!.body.toString())).toEqual({
          prompt: 'kling-marker [sim:short]',
          duration: '10',
          aspect_ratio: '9:16',
          generate_audio: true,
          image_url: FRAME,
          tail_image_url: LAST,
          negative_prompt: 'blur',
        });

        const done = await v.until(sub.json.id);
        // Kling takes no reference images: dropped and said so.
        expect(done).toMatchObject({ status: 'succeeded', mode: 'image-to-video', ignored: ['reference_image_urls'], data: [{ url: expect.any(String) }] });
        expect(t.sim.recorder.all().some((r) => r.method === 'GET' && statusPath.test(r.path) && r.headers.authorization === 'Key sim-fal-key')).toBe(true);

        const file = await fetch(done.data![0]!.url);
        expect(file.headers.get('content-type')).toBe('video/mp4');
        expect(mp4Boxes(Buffer.from(await file.arrayBuffer())).seconds).toBe(7.5);
        // 10 s held, 7.5 s delivered: 7.5 s charged, the rest released.
        expect(await chargedOf(t.store, sub.json.id)).toBe((75n * (P1080 + AUDIO)) / 10n);
        expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - (75n * (P1080 + AUDIO)) / 10n, held: before.held });
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'capture']);

        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: sub.json.id, status: 'succeeded', data: [{ url: expect.any(String) }] });
      } finally {
        await rx.close();
      }
    });

    it('a duration the family does not take is sent as the longest it takes below it (Kling: 7 -> "5"), and 5 s are charged', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await v.submit({ model: 'kling', prompt: 'kling-seven', duration: 7, generate_audio: false });
      const done = await v.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      expect(upstreamBody(t.sim, 'kling-seven')).toMatchObject({ duration: '5', generate_audio: false });
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 5n * P720, held: before.held });
    });

    it('video-to-video on Wan sends the reference video; Seedance takes first, last and reference images', async () => {
      const a = await v.submit({ model: 'wan', prompt: 'wan-marker', video_url: CLIP, resolution: '480p', duration: 5 });
      const b = await v.submit({
        model: 'seedance',
        prompt: 'seedance-marker',
        image_url: FRAME,
        last_image_url: LAST,
        reference_image_urls: [REF],
        duration: 6,
      });
      const [da, db] = await Promise.all([v.until(a.json.id), v.until(b.json.id)]);
      expect(da).toMatchObject({ status: 'succeeded', mode: 'video-to-video' });
      expect(da.ignored).toBeUndefined();
      expect(db).toMatchObject({ status: 'succeeded', mode: 'image-to-video' });
      expect(db.ignored).toBeUndefined();
      expect(upstreamBody(t.sim, 'wan-marker')).toEqual({ prompt: 'wan-marker', duration: '5', resolution: '480p', aspect_ratio: '16:9', video_url: CLIP });
      expect(upstreamBody(t.sim, 'seedance-marker')).toEqual({
        prompt: 'seedance-marker',
        duration: '6',
        resolution: '720p',
        aspect_ratio: '16:9',
        generate_audio: true,
        image_url: FRAME,
        end_image_url: LAST,
        reference_image_urls: [REF],
      });
      expect(await chargedOf(t.store, b.json.id)).toBe(6n * (P720 + AUDIO));
    });

    it('text-to-image on Flux: pixels as image_size, n as num_images, the PNGs copied into result storage and charged per image', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await img.submit('/v1/images/generations', { model: 'flux', prompt: 'flux-marker', n: 2, size: '1024x768', negative_prompt: 'blur' });
      expect(sub.status).toBe(200);
      expect(sub.json.status).toBe('queued');
      const done = await img.until(sub.json.id);
      expect(done).toMatchObject({ status: 'succeeded', ignored: ['negative_prompt'] });
      expect(done.data).toHaveLength(2);
      expect(upstreamBody(t.sim, 'flux-marker')).toEqual({ prompt: 'flux-marker', num_images: 2, image_size: { width: 1024, height: 768 } });
      for (const d of done.data!) {
        expect(d.url.startsWith(t.gw.url)).toBe(true);
        const f = await fetch(d.url);
        expect(pngDims(Buffer.from(await f.arrayBuffer()))).toEqual({ width: 1024, height: 768 });
      }
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 2n * IMG_1K, held: before.held });
    });

    it('inpaint on Flux Fill passes the image and the mask by URL', async () => {
      const sub = await img.submit('/v1/images/inpaint', { model: 'flux-fill', prompt: 'fill-marker', image_urls: [FRAME], mask_url: REF, size: '1:1' });
      expect(sub.status).toBe(200);
      expect((await img.until(sub.json.id)).status).toBe('succeeded');
      expect(upstreamBody(t.sim, 'fill-marker')).toEqual({
        prompt: 'fill-marker',
        num_images: 1,
        image_size: { width: 1024, height: 1024 },
        image_url: FRAME,
        mask_url: REF,
      });
    });

    it('a failed run refunds everything exactly once and delivers a signed failed webhook', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await v.submit({ model: 'kling', prompt: 'doomed [sim:fail]', webhook_url: rx.url, webhook_secret: SECRET });
        expect(sub.status).toBe(200);
        const done = await v.until(sub.json.id);
        expect(done).toMatchObject({ status: 'failed', error: { code: 'upstream_failed', message: expect.stringContaining('failed to generate') } });
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: sub.json.id, status: 'failed', error: done.error });
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
      } finally {
        await rx.close();
      }
    });

    it("content flagged by fal's checker after acceptance fails the task (content_policy_violation) and refunds it", async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await img.submit('/v1/images/generations', { model: 'flux', prompt: 'flagged [sim:blocked]' });
      expect(sub.status).toBe(200);
      const done = await img.until(sub.json.id);
      expect(done).toMatchObject({ status: 'failed', error: { code: 'content_policy_violation', message: expect.stringContaining('content checker') } });
      expect(await accountState(t.store, 'acct')).toEqual(before);
      // Read from the COMPLETED status's own error: the result was never fetched.
      const row = await t.store.query<{ upstream_id: string }>('SELECT upstream_id FROM tasks WHERE id = $1', [sub.json.id]);
      const base = `/fal/fal-ai/flux/requests/${row.rows[0]!.upstream_id}`;
      const gets = t.sim.recorder.all().filter((r) => r.method === 'GET' && r.path.startsWith(base));
      expect(gets.map((r) => r.path).at(-1)).toBe(`${base}/status`);
      expect(gets.some((r) => r.path === base)).toBe(false);
    });

    it('cancel refunds an unfinished video and asks fal to stop it (PUT .../cancel on owner/app)', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await v.submit({ model: 'kling', prompt: 'long take [sim:slow=20000]' });
      expect(sub.status).toBe(200);
      const cancelled = await v.cancel(sub.json.id);
      expect(cancelled.json).toMatchObject({ id: sub.json.id, status: 'cancelled', error: { code: 'cancelled' } });
      const puts = t.sim.recorder.all().filter((r) => r.method === 'PUT');
      expect(puts.map((r) => r.path)).toContainEqual(expect.stringMatching(/^\/fal\/fal-ai\/kling-video\/requests\/[0-9a-f-]{36}\/cancel$/));
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}

for (const sc of storeCases()) {
  describe(`fal.ai across a restart on ${sc.name}`, () => {
    it('a request queued by one gateway is polled to the end by the next and settled once', async () => {
      const store = await sc.open();
      const sim = await startSimulator();
      try {
        await grant(store, 'acct', 10n * C);
        const first = await startMediaGateway(store, sim, resources);
        const sub = await videoClient(first.url).submit({ model: 'kling', prompt: 'restart-marker [sim:slow=800]', duration: 5, generate_audio: false });
        expect(sub.status).toBe(200);
        await first.close();
        const row = await store.query<{ upstream_id: string | null; status: string }>('SELECT upstream_id, status FROM tasks WHERE id = $1', [sub.json.id]);
        expect(row.rows[0]).toMatchObject({ upstream_id: expect.stringMatching(/^[0-9a-f-]{36}$/), status: 'processing' });

        const second = await startMediaGateway(store, sim, resources);
        try {
          const done = await videoClient(second.url).until(sub.json.id);
          expect(done.status).toBe('succeeded');
          expect(sim.recorder.find('restart-marker')).toHaveLength(1);
          expect(await ledgerKinds(store, sub.json.id)).toEqual(['hold', 'capture']);
          expect(await accountState(store, 'acct')).toEqual({ balance: 10n * C - 5n * P720, held: 0n });
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
