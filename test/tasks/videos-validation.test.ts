import { describe, expect, it } from 'vitest';
import { accountState } from '../../proxy/billing/ledger.js';
import { storeCases } from '../support/stores.js';
import { C, useTasksStack } from './support.js';
import { videoClient, videoResources } from './videos-support.js';

const IMG = 'https://media.example.com/frame.png';
const CLIP = 'https://media.example.com/clip.mp4';
const ok = { model: 'vid-openai', prompt: 'a cat' };

/** [what, body, status, param]: every rule of the video endpoint. */
const CASES: [string, Record<string, unknown>, number, string][] = [
  ['model missing', { prompt: 'x' }, 400, 'model'],
  ['model not a string', { ...ok, model: 7 }, 400, 'model'],
  ['prompt missing', { model: 'vid-openai' }, 400, 'prompt'],
  ['prompt empty', { ...ok, prompt: '  ' }, 400, 'prompt'],
  ['prompt too long', { ...ok, prompt: 'x'.repeat(32_001) }, 400, 'prompt'],
  ['duration under 4', { ...ok, duration: 3 }, 400, 'duration'],
  ['duration not whole', { ...ok, duration: 4.5 }, 400, 'duration'],
  ['duration a string', { ...ok, duration: '5' }, 400, 'duration'],
  ['resolution not a tier', { ...ok, resolution: 'HD' }, 400, 'resolution'],
  ['resolution the model does not offer', { ...ok, resolution: '2160p' }, 400, 'resolution'],
  ['resolution without a price', { ...ok, model: 'vid-plain', resolution: '1080p' }, 400, 'resolution'],
  ['aspect_ratio not a ratio', { ...ok, aspect_ratio: '16x9' }, 400, 'aspect_ratio'],
  ['aspect_ratio too narrow', { ...ok, aspect_ratio: '9:1' }, 400, 'aspect_ratio'],
  ['generate_audio not a boolean', { ...ok, generate_audio: 'yes' }, 400, 'generate_audio'],
  ['image_url not http(s)', { ...ok, image_url: 'ftp://media.example.com/a.png' }, 400, 'image_url'],
  ['first_frame_url not a URL', { ...ok, first_frame_url: 'frame.png' }, 400, 'first_frame_url'],
  ['image_url and first_frame_url disagree', { ...ok, image_url: IMG, first_frame_url: `${IMG}?2` }, 400, 'first_frame_url'],
  ['last_frame_url at a private address', { ...ok, last_frame_url: 'http://10.0.0.7/last.png' }, 400, 'last_frame_url'],
  ['last_image_url and last_frame_url disagree', { ...ok, last_image_url: IMG, last_frame_url: CLIP }, 400, 'last_frame_url'],
  ['reference_images not an array', { ...ok, reference_images: IMG }, 400, 'reference_images'],
  ['reference_image_urls with a bad URL', { ...ok, reference_image_urls: [IMG, 'file:///etc/passwd'] }, 400, 'reference_image_urls[1]'],
  ['reference_image_urls with more than 16', { ...ok, reference_image_urls: Array(17).fill(IMG) }, 400, 'reference_image_urls'],
  ['reference_image_urls and reference_images disagree', { ...ok, reference_image_urls: [IMG], reference_images: [CLIP] }, 400, 'reference_images'],
  ['video_url not http(s)', { ...ok, video_url: 'rtsp://media.example.com/live' }, 400, 'video_url'],
  ['reference_video_url and video_url disagree', { ...ok, reference_video_url: CLIP, video_url: `${CLIP}?2` }, 400, 'video_url'],
  ['webhook_url without webhook_secret', { ...ok, webhook_url: 'https://hooks.example.com/v' }, 400, 'webhook_secret'],
  ['webhook_secret without webhook_url', { ...ok, webhook_secret: 's' }, 400, 'webhook_url'],
  ['webhook_url not http(s)', { ...ok, webhook_url: 'ftp://hooks.example.com/v', webhook_secret: 's' }, 400, 'webhook_url'],
  ['a duration above the model maximum', { ...ok, duration: 21 }, 404, 'duration'],
  ['a model outside the group', { ...ok, model: 'vid-elsewhere' }, 404, 'model'],
  ['an image model', { ...ok, model: 'img' }, 404, 'model'],
];

for (const sc of storeCases()) {
  describe(`video request validation on ${sc.name}`, () => {
    const t = useTasksStack(sc, { resources: videoResources, options: { allowLoopbackURLs: true, allowPrivateURLs: false }, credits: { acct: 10n * C } });

    it('answers every invalid request in the OpenAI error shape, naming the field, and keeps nothing', async () => {
      const c = videoClient(t.gw.url);
      const before = await accountState(t.store, 'acct');
      for (const [what, body, status, param] of CASES) {
        const r = await c.submit(body);
        expect(r.status, what).toBe(status);
        expect(r.json.error, what).toMatchObject({
          type: 'invalid_request_error',
          param,
          code: status === 404 ? expect.stringMatching(/not_found/) : 'invalid_request',
        });
        expect(r.json.error.message, what).toContain(param.replace(/\[\d+\]$/, ''));
      }
      expect((await c.submit('{"model": "vid-openai",')).status).toBe(400);
      expect((await t.store.query('SELECT id FROM tasks')).rows).toEqual([]);
      expect((await t.store.query('SELECT id FROM webhook_deliveries')).rows).toEqual([]);
      expect(await accountState(t.store, 'acct')).toEqual(before);
      expect(t.sim.recorder.all()).toEqual([]);
    });

    it('fills the defaults within what the model offers and accepts both names of each field', async () => {
      const c = videoClient(t.gw.url);
      const same = await c.submit({
        ...ok,
        prompt: 'same-marker',
        image_url: IMG,
        first_frame_url: IMG,
        reference_video_url: CLIP,
        video_url: CLIP,
        aspect_ratio: '32:18',
      });
      expect(same.status).toBe(200);
      const done = await c.until(same.json.id);
      expect(done).toMatchObject({ status: 'succeeded', mode: 'video-to-video', ignored: ['reference_video_url'] });
      const upstream = JSON.parse(t.sim.recorder.find('same-marker')[0]!.body.toString()) as Record<string, unknown>;
      expect(upstream).toEqual({ model: 'video-sim', prompt: 'same-marker', seconds: '5', size: '1280x720', input_reference: { image_url: IMG } });
      const task = await t.store.query<{ request: unknown }>('SELECT request FROM tasks WHERE id = $1', [same.json.id]);
      const job = typeof task.rows[0]!.request === 'string' ? JSON.parse(task.rows[0]!.request) : task.rows[0]!.request;
      expect(job).toMatchObject({ kind: 'video', mode: 'video-to-video', duration: 5, resolution: '720p', aspectRatio: '16:9', generateAudio: true });
    });
  });
}
