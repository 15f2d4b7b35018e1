import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceOf, providerStack, rid, route, withId, type ProviderStack } from './support.js';

/**
 * openai-compatible servers with `paths`: each protocol the server names is passed through to
 * its own path (DeepSeek's Chat Completions and its Anthropic-compatible Messages), the others
 * translated to one of them; DeepSeek-style reasoning_content becomes reasoning (thinking
 * blocks for Messages clients) and its reasoning tokens are charged as reported.
 */
const DS_KEY = 'sk-deepseek-sim-0123456789';
let p: ProviderStack;

beforeAll(async () => {
  p = await providerStack(
    (sim) => [
      route('ds-both', {
        provider: 'openai-compatible',
        baseURL: `${sim}/deepseek`,
        model: 'deepseek-chat',
        credentials: { env: 'DEEPSEEK_API_KEY' },
        paths: { chatCompletions: '/chat/completions', messages: '/anthropic/v1/messages' },
      }),
      route('ds-reasoner', { provider: 'openai-compatible', baseURL: `${sim}/deepseek`, model: 'deepseek-reasoner', credentials: { env: 'DEEPSEEK_API_KEY' } }),
    ],
    { DEEPSEEK_API_KEY: DS_KEY },
  );
});
afterAll(async () => {
  await p?.close();
  expect(p.logs.join('\n')).not.toContain(DS_KEY);
});

describe('paths per operation', () => {
  it("a Messages client is passed through to the server's Messages path: its own body, x-api-key and anthropic-version, no Anthropic beta flags", async () => {
    const id = rid('ds-m');
    const msg = await p.anthropic.messages.create(
      {
        model: 'ds-both',
        max_tokens: 100,
        system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: 'Hi' }],
      },
      { headers: { 'x-request-id': id, 'anthropic-beta': 'claude-code-20250219' } },
    );
    expect(msg.type).toBe('message');
    const up = p.upstream(id);
    expect(up.path).toBe('/deepseek/anthropic/v1/messages');
    expect(up.headers['x-api-key']).toBe(DS_KEY);
    expect(up.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(up.headers['anthropic-beta']).toBeUndefined();
    // Passthrough: the client's cache_control is still there (translation would not carry it).
    expect(up.body).toMatchObject({ model: 'deepseek-chat', system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }] });
    const rec = await p.record(id);
    expect(msg.usage.output_tokens).toBe(Number(rec.output_tokens));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('a Chat Completions client is passed through to the chat path; a Responses client is translated to the Messages path', async () => {
    const id = rid('ds-cc');
    await p.openai.chat.completions.create({ model: 'ds-both', messages: [{ role: 'user', content: 'Hi' }] }, withId(id));
    expect(p.upstream(id).path).toBe('/deepseek/chat/completions');
    const id2 = rid('ds-r');
    const r = await p.openai.responses.create({ model: 'ds-both', input: 'Hi' }, withId(id2));
    expect(r.output_text.length).toBeGreaterThan(0);
    const up = p.upstream(id2);
    expect(up.path).toBe('/deepseek/anthropic/v1/messages');
    expect(up.body).toMatchObject({ model: 'deepseek-chat', max_tokens: 4096, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }] });
  });
});

describe('DeepSeek-style reasoning', () => {
  it('Chat Completions passthrough: reasoning_content reaches the client; usage on the finishing chunk is charged, reasoning tokens included', async () => {
    const id = rid('ds-cc-r');
    const stream = await p.openai.chat.completions.create({ model: 'ds-reasoner', stream: true, messages: [{ role: 'user', content: 'Think' }] }, withId(id));
    let reasoning = '';
    let text = '';
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string | null } | undefined;
      reasoning += d?.reasoning_content ?? '';
      text += d?.content ?? '';
    }
    expect(reasoning.length).toBeGreaterThan(0);
    const rec = await p.record(id);
    expect(rec).toMatchObject({ usage_source: 'reported', status: 'ok' });
    expect(Number(rec.reasoning_tokens)).toBe(reasoning.split(' ').length);
    expect(Number(rec.output_tokens)).toBe(reasoning.split(' ').length + text.split(' ').length);
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('Messages client, translated: reasoning_content becomes a thinking block before the text', async () => {
    const id = rid('ds-m-r');
    const msg = await p.anthropic.messages
      .stream({ model: 'ds-reasoner', max_tokens: 500, messages: [{ role: 'user', content: 'Think hard' }] }, withId(id))
      .finalMessage();
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect((msg.content[0] as { thinking: string }).thinking.length).toBeGreaterThan(0);
    const rec = await p.record(id);
    expect(msg.usage.output_tokens).toBe(Number(rec.output_tokens));
    expect(Number(rec.reasoning_tokens)).toBeGreaterThan(0);
  });
});
