import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API, apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';

/** GET /v1/models carries each model's type, capabilities and the key's group's live prices. */
const KEY = 'sk-service-catalog';
const CC = 'sk-service-catalog-cc';

const image = (sim: string) => ({
  apiVersion: API,
  kind: 'ModelRoute',
  metadata: { name: 'img' },
  spec: {
    type: 'image',
    backends: [{ provider: 'openai', baseURL: `${sim}/v1`, model: 'image-sim' }],
    pricing: { perImage: { '1K': '0.02', '2K:high': '0.06' } },
    capabilities: { inpaint: true },
  },
});
const video = (sim: string) => ({
  apiVersion: API,
  kind: 'ModelRoute',
  metadata: { name: 'vid' },
  spec: {
    type: 'video',
    backends: [{ provider: 'replicate', baseURL: `${sim}/v1`, model: 'sim/video' }],
    pricing: { perSecond: { '480p': '0.05', '1080p': '0.2' }, audioPerSecond: '0.02' },
    capabilities: { audio: true, resolutions: ['480p', '1080p'] },
  },
});

function resources(sim: string, multiplier = '1') {
  return [
    chatRoute('gpt', `${sim}/v1`, { pricing: { inputPerMillion: '0.50', cachedInputPerMillion: '0.05', outputPerMillion: '1.50' } }),
    image(sim),
    video(sim),
    group('g', ['gpt', 'img', 'vid'], { priceMultiplier: multiplier, priceOverrides: { gpt: { outputPerMillion: '1.25' } } }),
    group('cc', ['gpt'], { ccOnly: true }),
    apiKey('k', KEY, 'g'),
    apiKey('cc', CC, 'cc'),
  ];
}

let stack: Stack;
let simUrl: string;
beforeAll(async () => {
  stack = await startStack((sim) => {
    simUrl = sim;
    return resources(sim);
  });
});
afterAll(() => stack.close());

describe('the model catalog', () => {
  it('lists type, capabilities and group prices through the official OpenAI SDK', async () => {
    const client = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const list = (await client.models.list()).data as unknown as Record<string, unknown>[];
    expect(list.map((m) => m.id)).toEqual(['gpt', 'img', 'vid']);
    expect(list[0]).toMatchObject({
      object: 'model',
      type: 'chat',
      capabilities: { max_output_tokens: expect.any(Number) },
      // the override wins over the base price; the rest is the base price x 1
      pricing: { currency: 'credits', input_per_million: '0.500000', cached_input_per_million: '0.050000', output_per_million: '1.250000' },
    });
    expect(list[1]).toMatchObject({ type: 'image', capabilities: { inpaint: true }, pricing: { per_image: { '1K': '0.020000', '2K:high': '0.060000' } } });
    expect(list[2]).toMatchObject({
      type: 'video',
      capabilities: { audio: true },
      pricing: { per_second: { '480p': '0.050000', '1080p': '0.200000' }, audio_per_second: '0.020000' },
    });
    const one = (await client.models.retrieve('vid')) as unknown as Record<string, unknown>;
    expect(one).toEqual(list[2]);
    await expect(client.models.retrieve('nope')).rejects.toMatchObject({ status: 404 });
  });

  it("gives the Anthropic list shape the same object; prices follow a change of the group's multiplier", async () => {
    const client = new Anthropic({ baseURL: stack.gw.url, apiKey: null, authToken: KEY, maxRetries: 0 });
    const page = await client.models.list();
    const vid = page.data.find((m) => m.id === 'vid') as unknown as Record<string, unknown>;
    expect(vid).toMatchObject({ type: 'model', display_name: 'vid', model_type: 'video', pricing: { per_second: { '1080p': '0.200000' } } });
    stack.apply(resources(simUrl, '2'));
    const after = (await (await request(`${stack.gw.url}/v1/models/img`, { headers: { authorization: `Bearer ${KEY}` } })).body.json()) as {
      pricing: { per_image: Record<string, string> };
    };
    expect(after.pricing.per_image).toEqual({ '1K': '0.040000', '2K:high': '0.120000' });
    stack.apply(resources(simUrl));
  });

  it('lets a ccOnly key read its catalog, credits and usage from any client', async () => {
    for (const path of ['/v1/models', '/v1/models/gpt', '/v1/credits', '/v1/usage']) {
      const r = await request(`${stack.gw.url}${path}`, { headers: { authorization: `Bearer ${CC}` } });
      expect(r.statusCode, path).toBe(200);
      await r.body.dump();
    }
    const r = await request(`${stack.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CC}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r.statusCode).toBe(403);
    await r.body.dump();
  });
});
