import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { loadFixtures } from './fixtures.js';
import { RecordingBilling } from './support.js';

const CC_KEY = 'sk-service-cc-only-test';
const billing = new RecordingBilling();
let stack: Stack;

beforeAll(async () => {
  stack = await startStack(
    (sim) => [
      chatRoute('sim-claude', sim, { backend: { provider: 'anthropic', model: 'claude-sim' } }),
      chatRoute('sim-gpt', `${sim}/v1`),
      group('cc', ['sim-claude', 'sim-gpt'], { ccOnly: true }),
      apiKey('cc-key', CC_KEY, 'cc'),
    ],
    { billing: billing.factory },
  );
});
afterAll(() => stack.close());

/** Replays a recorded client request byte for byte (headers and body as the client sent them), with our key. */
async function replay(f: ReturnType<typeof loadFixtures>[number], path = f.path) {
  const body = JSON.stringify({ ...f.body, model: 'sim-claude' });
  const r = await request(`${stack.gw.url}${path}`, { method: f.method, headers: { ...f.headers, authorization: `Bearer ${CC_KEY}` }, body });
  return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
}

describe('a ccOnly group', () => {
  for (const f of loadFixtures()) {
    if (f.expect === 'claude-code') {
      it(`serves Claude Code: ${f.name}`, async () => {
        const r = await replay(f);
        expect(r.status, r.text).toBe(200);
        if (f.path.startsWith('/v1/messages/count_tokens')) expect(JSON.parse(r.text)).toMatchObject({ input_tokens: expect.any(Number) });
        else if (f.body.stream === true) expect(r.text).toMatch(/event: message_stop\ndata: \{"type":"message_stop"\}\n\n$/);
        else expect(JSON.parse(r.text)).toMatchObject({ type: 'message', stop_reason: 'max_tokens' });
      });
    } else {
      it(`refuses ${f.name} with 403 naming the restriction, holding nothing`, async () => {
        const before = billing.quotes.size;
        const r = await replay(f);
        expect(r.status).toBe(403);
        expect(JSON.parse(r.text)).toMatchObject({
          type: 'error',
          error: { type: 'permission_error', message: expect.stringMatching(/restricted to the Claude Code client/) },
        });
        expect(billing.quotes.size).toBe(before);
      });
    }
  }

  it('refuses the official Anthropic SDK on /v1/messages and count_tokens, and lets it read the catalog', async () => {
    const client = new Anthropic({ baseURL: stack.gw.url, apiKey: null, authToken: CC_KEY, maxRetries: 0 });
    const msg = { model: 'sim-claude', max_tokens: 10, messages: [{ role: 'user' as const, content: 'hi' }] };
    await expect(client.messages.create(msg)).rejects.toBeInstanceOf(Anthropic.PermissionDeniedError);
    await expect(client.messages.countTokens({ model: 'sim-claude', messages: msg.messages })).rejects.toMatchObject({ status: 403 });
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['sim-claude', 'sim-gpt']);
  });

  it('refuses the OpenAI endpoints, which Claude Code does not use, whatever the client', async () => {
    const client = new OpenAI({
      baseURL: `${stack.gw.url}/v1`,
      apiKey: CC_KEY,
      maxRetries: 0,
      defaultHeaders: loadFixtures().find((f) => f.name === 'claude-code-2.1-interactive')!.headers,
    });
    const err = await client.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((err as Error).message).toMatch(/restricted to the Claude Code client, which uses \/v1\/messages only/);
    await expect(client.responses.create({ model: 'sim-gpt', input: 'hi' })).rejects.toMatchObject({ status: 403, type: 'permission_error' });
  });

  it('refuses every other endpoint (images, videos) with 403 in the OpenAI shape before its handler runs', async () => {
    const cc = loadFixtures().find((f) => f.name === 'claude-code-2.1-interactive')!;
    const upstreamBefore = stack.sim.recorder.all().length;
    for (const [method, path, body] of [
      ['POST', '/v1/images/generations', { model: 'sim-claude', prompt: 'a cat' }],
      ['POST', '/v1/videos/generations', { model: 'sim-claude', prompt: 'a cat' }],
    ] as const) {
      const r = await request(`${stack.gw.url}${path}`, {
        method,
        headers: { ...cc.headers, authorization: `Bearer ${CC_KEY}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      expect(r.statusCode, path).toBe(403);
      expect(await r.body.json(), path).toMatchObject({
        error: { type: 'permission_error', message: expect.stringContaining(`restricted to the Claude Code client, which does not use ${path}`) },
      });
    }
    expect(stack.sim.recorder.all().length).toBe(upstreamBefore);
  });

  it("lists models for Claude Code's own requests", async () => {
    const cc = loadFixtures().find((f) => f.name === 'claude-code-2.1-interactive')!;
    const r = await request(`${stack.gw.url}/v1/models`, { headers: { ...cc.headers, authorization: `Bearer ${CC_KEY}` } });
    expect(r.statusCode).toBe(200);
    expect(((await r.body.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(['sim-claude', 'sim-gpt']);
  });
});
