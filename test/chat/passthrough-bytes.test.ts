import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { RecordingBilling, rid, upstreamOf } from './support.js';

/**
 * Byte fidelity of the passthrough: the simulator's `[sim:frayed]` streams come with CRLF line
 * ends, a comment and an unknown event, every event written in 7-byte pieces (so pieces end
 * inside characters, between \r and \n, inside `data:`). The client must receive exactly the
 * bytes the simulator wrote, and the tap must still find the usage in them.
 */
const KEY = 'sk-service-bytes-test';
const billing = new RecordingBilling();
let stack: Stack;

beforeAll(async () => {
  stack = await startStack(
    (sim) => [
      chatRoute('sim-claude', sim, { backend: { provider: 'anthropic', model: 'claude-sim' } }),
      chatRoute('sim-gpt', `${sim}/v1`),
      group('g', ['sim-claude', 'sim-gpt']),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
});
afterAll(() => stack.close());

const PROMPT = 'héllo 🌍 "quoted" [sim:frayed]';

async function post(path: string, body: object, id: string) {
  const r = await request(`${stack.gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const bytes = Buffer.from(await r.body.arrayBuffer());
  const sent = upstreamOf(stack.sim, id).sent!;
  return { status: r.statusCode, bytes, sent };
}

/** The JSON of every `data:` line the simulator wrote (CRLF line ends). */
function dataOf(sent: Buffer): Record<string, any>[] {
  return sent
    .toString()
    .split('\r\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)) as Record<string, any>);
}

describe("a stream's head", () => {
  it('goes out alone when the upstream sends its head and then pauses before the first event', async () => {
    const t0 = performance.now();
    const r = await request(`${stack.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': rid('b-pause') },
      body: JSON.stringify({ model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: 'hello [sim:pause=1500]' }] }),
    });
    const head = performance.now() - t0;
    const text = await r.body.text();
    const whole = performance.now() - t0;
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/event-stream/);
    // The client knows its stream is open long before the first event comes.
    expect(head).toBeLessThan(1000);
    expect(whole).toBeGreaterThanOrEqual(1400);
    expect(text).toMatch(/data: \[DONE\]\n\n$/);
  });

  it('goes out alone for each of several streams held at different moments (one timer serves them all)', async () => {
    const paused = async (i: number) => {
      const t0 = performance.now();
      const r = await request(`${stack.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': rid(`b-pauses-${i}`) },
        body: JSON.stringify({ model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: `hello ${i} [sim:pause=1500]` }] }),
      });
      const head = performance.now() - t0;
      const text = await r.body.text();
      return { head, whole: performance.now() - t0, text };
    };
    // Held 0, 10 and 20 ms apart: when the first is due, the others are not yet.
    const streams = [0, 1, 2].map((i) => new Promise((r) => setTimeout(r, i * 10)).then(() => paused(i)));
    for (const s of await Promise.all(streams)) {
      expect(s.head).toBeLessThan(1000);
      expect(s.whole).toBeGreaterThanOrEqual(1400);
      expect(s.text).toMatch(/data: \[DONE\]\n\n$/);
    }
  });
});

describe('passthrough streams are relayed byte for byte while the tap reads usage', () => {
  it('Anthropic Messages', async () => {
    const id = rid('b-msg');
    const r = await post('/v1/messages', { model: 'sim-claude', max_tokens: 64, messages: [{ role: 'user', content: PROMPT }] }, id);
    expect(r.status).toBe(200);
    expect(r.sent.toString()).toContain('\r\n: keep-alive comment\r\n\r\nevent: future_event\r\n');
    expect(r.bytes.equals(r.sent)).toBe(true);
    const events = dataOf(r.sent);
    const start = events.find((e) => e.type === 'message_start')!.message.usage;
    const delta = events.find((e) => e.type === 'message_delta')!.usage;
    expect(billing.settled(id)).toMatchObject({
      status: 'ok',
      usageSource: 'reported',
      usage: {
        inputTokens: start.input_tokens + start.cache_read_input_tokens + start.cache_creation_input_tokens,
        cachedInputTokens: start.cache_read_input_tokens,
        cacheWriteTokens: start.cache_creation_input_tokens,
        outputTokens: delta.output_tokens,
      },
    });
  });

  it('OpenAI Chat Completions (usage chunk, [DONE])', async () => {
    const id = rid('b-chat');
    const r = await post('/v1/chat/completions', { model: 'sim-gpt', messages: [{ role: 'user', content: PROMPT }] }, id);
    expect(r.status).toBe(200);
    expect(r.sent.toString()).toMatch(/data: \[DONE\]\r\n\r\n$/);
    expect(r.bytes.equals(r.sent)).toBe(true);
    const usage = dataOf(r.sent).find((e) => e.usage)!.usage;
    expect(billing.settled(id)).toMatchObject({
      usageSource: 'reported',
      usage: { inputTokens: usage.prompt_tokens, cachedInputTokens: usage.prompt_tokens_details.cached_tokens, outputTokens: usage.completion_tokens },
    });
  });

  it('OpenAI Responses', async () => {
    const id = rid('b-resp');
    const r = await post('/v1/responses', { model: 'sim-gpt', input: PROMPT }, id);
    expect(r.status).toBe(200);
    expect(r.bytes.equals(r.sent)).toBe(true);
    const usage = dataOf(r.sent).find((e) => e.type === 'response.completed')!.response.usage;
    expect(billing.settled(id)).toMatchObject({
      usageSource: 'reported',
      usage: {
        inputTokens: usage.input_tokens,
        cachedInputTokens: usage.input_tokens_details.cached_tokens,
        outputTokens: usage.output_tokens,
        reasoningTokens: usage.output_tokens_details.reasoning_tokens,
      },
    });
  });
});

describe('a large request body (a coding agent sends hundreds of KB)', () => {
  // From 16 KiB the gateway hands undici a body it may let go of once written (proxy/upstreams/body.ts).
  const big = 'A tool result, ünïcode and "quotes" included.\n'.repeat(6000);

  it.each([
    ['/v1/messages', { model: 'sim-claude', max_tokens: 64, stream: true, messages: [{ role: 'user', content: big }] }, 'claude-sim'],
    ['/v1/chat/completions', { model: 'sim-gpt', max_tokens: 64, stream: false, messages: [{ role: 'user', content: big }] }, 'sim-gpt'],
  ] as const)('%s: reaches the upstream whole, with its content-length and not chunked', async (path, body, upstreamModel) => {
    const id = rid('b-large');
    const sent = JSON.stringify(body);
    const r = await request(`${stack.gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': id },
      body: sent,
    });
    const answer = await r.body.text();
    expect(r.statusCode).toBe(200);
    expect(answer).toContain(body.stream ? 'message_stop' : '"finish_reason"');
    const rec = upstreamOf(stack.sim, id);
    expect(rec.headers['transfer-encoding']).toBeUndefined();
    expect(rec.headers['content-length']).toBe(String(rec.body.length));
    // Only the model is spliced: every other byte is the client's.
    expect(rec.body.toString()).toBe(sent.replace(`"model":"${body.model}"`, `"model":"${upstreamModel}"`));
    expect(rec.body.length).toBeGreaterThan(250_000);
  });

  it('translated (Chat Completions to an Anthropic backend): the encoded body reaches the upstream whole, with its content-length', async () => {
    const id = rid('b-large-ir');
    const r = await request(`${stack.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: 'sim-claude', max_tokens: 64, stream: false, messages: [{ role: 'user', content: big }] }),
    });
    const answer = (await r.body.json()) as { object: string };
    expect(r.statusCode).toBe(200);
    expect(answer.object).toBe('chat.completion');
    const rec = upstreamOf(stack.sim, id);
    expect(rec.path).toBe('/v1/messages');
    expect(rec.headers['transfer-encoding']).toBeUndefined();
    expect(rec.headers['content-length']).toBe(String(rec.body.length));
    const sent = JSON.parse(rec.body.toString()) as { messages: { content: string | { text: string }[] }[] };
    const content = sent.messages[0]!.content;
    expect(typeof content === 'string' ? content : content.map((p) => p.text).join('')).toBe(big);
  });
});
