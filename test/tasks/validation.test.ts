import { describe, expect, it } from 'vitest';
import { accountState } from '../../proxy/billing/ledger.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { C, client, imageRoute, KEY, useTasksStack } from './support.js';

const POOR = 'sk-service-tasks-poor';
const G = '/v1/images/generations';
const E = '/v1/images/edits';
const I = '/v1/images/inpaint';
const IMG = 'https://images.example.com/cat.png';
const ok = { model: 'img', prompt: 'a cat' };

/** [what, path, body, status, param]: every rule of the image endpoints. */
const CASES: [string, string, Record<string, unknown>, number, string][] = [
  ['model missing', G, { prompt: 'x' }, 400, 'model'],
  ['model not a string', G, { ...ok, model: 7 }, 400, 'model'],
  ['prompt missing', G, { model: 'img' }, 400, 'prompt'],
  ['prompt empty', G, { ...ok, prompt: ' ' }, 400, 'prompt'],
  ['prompt too long', G, { ...ok, prompt: 'x'.repeat(32_001) }, 400, 'prompt'],
  ['n zero', G, { ...ok, n: 0 }, 400, 'n'],
  ['n five', G, { ...ok, n: 5 }, 400, 'n'],
  ['n fractional', G, { ...ok, n: 1.5 }, 400, 'n'],
  ['n a string', G, { ...ok, n: '2' }, 400, 'n'],
  ['size garbage', G, { ...ok, size: 'large' }, 400, 'size'],
  ['size too small', G, { ...ok, size: '10x10' }, 400, 'size'],
  ['size too large', G, { ...ok, size: '9000x9000' }, 400, 'size'],
  ['size ratio too narrow', G, { ...ok, size: '20:1' }, 400, 'size'],
  ['size not a string', G, { ...ok, size: 1024 }, 400, 'size'],
  ['resolution unknown', G, { ...ok, resolution: '8K' }, 400, 'resolution'],
  ['resolution alias unknown', G, { ...ok, image_size: '3K' }, 400, 'image_size'],
  ['resolution and its alias disagree', G, { ...ok, resolution: '1K', image_size: '2K' }, 400, 'image_size'],
  ['resolution contradicts the pixels', G, { ...ok, resolution: '1K', size: '2048x2048' }, 400, 'resolution'],
  ['size tier contradicts resolution', G, { ...ok, resolution: '1K', size: '2K' }, 400, 'resolution'],
  ['quality not offered by the model', G, { ...ok, quality: 'ultra' }, 400, 'quality'],
  ['quality on a model without quality tiers', G, { ...ok, model: 'img-basic', quality: 'high' }, 400, 'quality'],
  ['negative prompt not a string', G, { ...ok, negative_prompt: ['blur'] }, 400, 'negative_prompt'],
  ['negative prompt and its alias disagree', G, { ...ok, negative_prompt: 'a', negativePrompt: 'b' }, 400, 'negativePrompt'],
  ['image inputs on generations', G, { ...ok, image_urls: [IMG] }, 400, 'image_urls'],
  ['edits without images', E, ok, 400, 'image_urls'],
  ['image_urls not an array', E, { ...ok, image_urls: IMG }, 400, 'image_urls'],
  ['image_urls with a non-http URL', E, { ...ok, image_urls: [IMG, 'ftp://x/y.png'] }, 400, 'image_urls[1]'],
  ['image_urls with a private address', E, { ...ok, image_urls: ['http://10.1.2.3/a.png'] }, 400, 'image_urls[0]'],
  ['image_urls with more than 16 URLs', E, { ...ok, image_urls: Array(17).fill(IMG) }, 400, 'image_urls'],
  ['image and image_urls disagree', E, { ...ok, image_urls: [IMG], image: `${IMG}?2` }, 400, 'image'],
  ['image not a URL', E, { ...ok, image: 'cat.png' }, 400, 'image'],
  ['inpaint without a mask', I, { ...ok, image: IMG }, 400, 'mask_url'],
  ['a mask on edits', E, { ...ok, image: IMG, mask_url: IMG }, 400, 'mask_url'],
  ['mask_url not http(s)', I, { ...ok, image: IMG, mask_url: 'file:///etc/passwd' }, 400, 'mask_url'],
  ['inpaint on a model without inpainting', I, { ...ok, model: 'img-basic', image: IMG, mask_url: IMG }, 400, 'model'],
  ['webhook_url not http(s)', G, { ...ok, webhook_url: 'ftp://hooks.example.com/x', webhook_secret: 's' }, 400, 'webhook_url'],
  ['webhook_url without webhook_secret', G, { ...ok, webhook_url: 'https://hooks.example.com/x' }, 400, 'webhook_secret'],
  ['webhook_secret without webhook_url', G, { ...ok, webhook_secret: 's' }, 400, 'webhook_url'],
  ['webhook_url at the metadata address', G, { ...ok, webhook_url: 'http://169.254.169.254/latest', webhook_secret: 's' }, 400, 'webhook_url'],
  ['webhook_url with credentials', G, { ...ok, webhook_url: 'https://u:p@hooks.example.com/x', webhook_secret: 's' }, 400, 'webhook_url'],
  ['a tier the model does not offer', G, { ...ok, model: 'img-basic', resolution: '4K' }, 400, 'resolution'],
  ['a model outside the group', G, { ...ok, model: 'img-elsewhere' }, 404, 'model'],
  ['a chat model', G, { ...ok, model: 'chat' }, 404, 'model'],
];

for (const sc of storeCases()) {
  describe(`image request validation on ${sc.name}`, () => {
    const t = useTasksStack(sc, {
      resources: (s) => [
        imageRoute('img', 'openai', `${s}/v1`, { model: 'gpt-image-1' }),
        imageRoute('img-basic', 'openai', `${s}/v1`, { capabilities: {}, pricing: { perImage: { '1K': '0.01' } } }),
        imageRoute('img-elsewhere', 'openai', `${s}/v1`),
        chatRoute('chat', `${s}/v1`),
        group('g', ['img', 'img-basic', 'chat']),
        group('other', ['img-elsewhere']),
        apiKey('k', KEY, 'g', { account: 'acct' }),
        apiKey('poor', POOR, 'g', { account: 'poor' }),
      ],
      options: { allowLoopbackURLs: true, allowPrivateURLs: false },
      credits: { acct: 10n * C },
    });

    it('answers every invalid request in the OpenAI error shape, naming the field, and keeps nothing', async () => {
      const c = client(t.gw.url);
      const before = await accountState(t.store, 'acct');
      for (const [what, path, body, status, param] of CASES) {
        const r = await c.submit(path, body);
        expect(r.status, what).toBe(status);
        expect(r.json.error, what).toMatchObject({ type: 'invalid_request_error', param, code: status === 404 ? 'model_not_found' : 'invalid_request' });
        expect(r.json.error.message, what).toContain(param.replace(/\[\d+\]$/, ''));
      }
      const bad = [await c.submit(G, '{"model": "img",'), await c.submit(G, '[]'), await c.submit(G, ok, { 'idempotency-key': 'x'.repeat(256) })];
      expect(bad.map((r) => r.status)).toEqual([400, 400, 400]);
      expect(bad[2]!.json.error.param).toBe('Idempotency-Key');
      expect((await client(t.gw.url, 'sk-service-nobody').submit(G, ok)).status).toBe(401);

      const poor = await client(t.gw.url, POOR).submit(G, ok);
      expect(poor.status).toBe(402);
      expect(poor.json.error.type).toBe('insufficient_quota');
      // Several faults at once: the first in the contract's order (as on chat): body, key, credits, model.
      const nobody = client(t.gw.url, 'sk-service-nobody');
      expect((await nobody.submit(G, '{"model": "img",')).status).toBe(400);
      expect((await nobody.submit(G, { ...ok, model: 'img-elsewhere' })).status).toBe(401);
      expect((await client(t.gw.url, POOR).submit(G, { ...ok, model: 'img-elsewhere' })).status).toBe(402);
      expect((await client(t.gw.url, POOR).submit('/v1/videos/generations', { model: 'nope', prompt: 'x' })).status).toBe(402);
      expect((await nobody.submit('/v1/videos/generations', { model: 'nope', prompt: 'x', duration: 2 })).status).toBe(400);

      expect((await t.store.query('SELECT id FROM tasks')).rows).toEqual([]);
      expect((await t.store.query('SELECT id FROM webhook_deliveries')).rows).toEqual([]);
      expect(await accountState(t.store, 'acct')).toEqual(before);
      expect(await accountState(t.store, 'poor')).toEqual({ balance: 0n, held: 0n });
      expect(t.sim.recorder.all()).toEqual([]);
    });

    it('accepts the documented aliases and lists what it could not pass on as ignored', async () => {
      const c = client(t.gw.url);
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit(G, { ...ok, image_size: '2k', negativePrompt: 'blur', quality: 'HIGH', size: '3:2', response_format: 'url' });
      expect(sub.status).toBe(200);
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance, held: before.held + 60_000n }); // "2K:high"
      const done = await c.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      // OpenAI has no negative prompt; response_format is not a field of this API.
      expect(done.ignored).toEqual(['negative_prompt', 'response_format']);
      const upstream = JSON.parse(t.sim.recorder.last('/v1/images/generations')!.body.toString()) as Record<string, unknown>;
      expect(upstream).toMatchObject({ prompt: 'a cat', quality: 'high', size: '1536x1024', n: 1 });
      expect(upstream.negative_prompt).toBeUndefined();
    });
  });
}
