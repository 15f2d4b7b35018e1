import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, waitFor, type Stack } from '../support/stack.js';
import { RecordingBilling, rid, upstreamOf, withRequestId } from './support.js';

const KEY = 'sk-service-messages-test';
const billing = new RecordingBilling();
let stack: Stack;
let client: Anthropic;

const anthropicRoute = (name: string, baseURL: string, backend: Record<string, unknown> = {}, spec: Record<string, unknown> = {}) =>
  chatRoute(name, baseURL, { backend: { provider: 'anthropic', model: 'claude-sim', ...backend }, ...spec });

beforeAll(async () => {
  stack = await startStack(
    (sim) => [
      anthropicRoute('sim-claude', sim),
      anthropicRoute('claude-nocount', sim, {}, { capabilities: { countTokens: false } }),
      chatRoute('sim-gpt', `${sim}/v1`),
      group('g', ['sim-claude', 'claude-nocount', 'sim-gpt']),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
  client = new Anthropic({ baseURL: stack.gw.url, apiKey: null, authToken: KEY, maxRetries: 0 });
});
afterAll(() => stack.close());

describe('POST /v1/messages through the gateway (@anthropic-ai/sdk)', () => {
  it('messages.create: the upstream answer, usage settled as the simulator reported it, model rewritten upstream', async () => {
    const id = rid('m-create');
    const { data: msg, response } = await client.messages
      .create({ model: 'sim-claude', max_tokens: 100, messages: [{ role: 'user', content: 'Hello there' }] }, withRequestId(id))
      .withResponse();
    expect(response.headers.get('x-request-id')).toBe(id);
    expect(msg.type).toBe('message');
    expect(msg.content[0]!.type).toBe('text');
    expect(msg.stop_reason).toBe('end_turn');
    const up = upstreamOf(stack.sim, id);
    expect(JSON.parse(up.body.toString()).model).toBe('claude-sim');
    expect(up.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/); // the SDK's own version, forwarded
    expect(up.headers.authorization).toBeUndefined();
    const s = billing.settled(id);
    expect(s.status).toBe('ok');
    expect(s.usageSource).toBe('reported');
    expect(s.usage).toEqual({
      inputTokens: msg.usage.input_tokens,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: msg.usage.output_tokens,
      reasoningTokens: 0,
    });
  });

  it('messages.stream: thinking and text arrive as sent, message_start + message_delta usage (with cache reads) is what settles', async () => {
    const system = [
      { type: 'text' as const, text: `You are a careful assistant ${'and a patient one '.repeat(20)}`, cache_control: { type: 'ephemeral' as const } },
    ];
    const ask = (id: string) =>
      client.messages.stream(
        {
          model: 'sim-claude',
          max_tokens: 2000,
          system,
          thinking: { type: 'enabled', budget_tokens: 1024 },
          messages: [{ role: 'user', content: `cache me ${id}` }],
        },
        withRequestId(id),
      );
    const first = rid('m-stream1');
    const firstMsg = await ask(first).finalMessage();
    expect(firstMsg.usage.cache_creation_input_tokens).toBeGreaterThan(0);
    expect(billing.settled(first).usage!.cacheWriteTokens).toBe(firstMsg.usage.cache_creation_input_tokens);

    const id = rid('m-stream2');
    const stream = ask(id);
    let text = '';
    let thinking = '';
    stream.on('text', (t) => (text += t));
    stream.on('thinking', (t) => (thinking += t));
    const msg = await stream.finalMessage();
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect(text).toBe((msg.content[1] as Anthropic.TextBlock).text);
    expect(thinking.length).toBeGreaterThan(0);
    const u = msg.usage;
    expect(u.cache_read_input_tokens).toBeGreaterThan(0);
    const s = billing.settled(id);
    expect(s.usageSource).toBe('reported');
    expect(s.usage).toEqual({
      inputTokens: u.input_tokens + u.cache_read_input_tokens! + u.cache_creation_input_tokens!,
      cachedInputTokens: u.cache_read_input_tokens,
      cacheWriteTokens: u.cache_creation_input_tokens,
      outputTokens: u.output_tokens,
      reasoningTokens: 0,
    });
    expect(s.ttftMs).toBeGreaterThan(0);
  });

  it('tool use round trip: streamed input_json_delta, then a tool_result answered in text', async () => {
    const tools: Anthropic.Tool[] = [
      {
        name: 'get_weather',
        description: 'Weather of a city',
        input_schema: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city', 'days'] },
      },
    ];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await client.messages.stream({ model: 'sim-claude', max_tokens: 500, tools, tool_choice: { type: 'any' }, messages }).finalMessage();
    expect(first.stop_reason).toBe('tool_use');
    const call = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(call.name).toBe('get_weather');
    expect(call.input).toEqual({ city: 'Weather in Paris?', days: 1 });
    messages.push(
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '18°C and sunny' }] },
    );
    const id = rid('m-tool2');
    const second = await client.messages.create({ model: 'sim-claude', max_tokens: 500, tools, messages }, withRequestId(id));
    expect(second.stop_reason).toBe('end_turn');
    expect(second.content[0]!.type).toBe('text');
    // The tool_result reached the upstream exactly as the client sent it.
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as { messages: unknown[] };
    expect(up.messages[2]).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '18°C and sunny' }] });
  });

  it('unknown fields, a role: system message and ?beta=true reach the upstream byte-equal', async () => {
    const id = rid('m-raw');
    const body = `{"model":"sim-claude","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"system","content":"be brief"}],"context_management":{"edits":[]},"output_config":{"effort":"high"},"x_weird":1.50e0}`;
    const r = await fetch(`${stack.gw.url}/v1/messages?beta=true`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
        'anthropic-beta': 'context-management-2025-06-27',
        'x-request-id': id,
        cookie: 'session=secret',
        'x-api-key': 'sk-ant-not-ours',
      },
      body,
    });
    expect(r.status).toBe(200);
    const up = upstreamOf(stack.sim, id);
    expect(up.body.toString()).toBe(
      body.replace('"sim-claude"', '"claude-sim"').replace('"max_tokens":64', '"max_tokens":64').replace('{"model"', '{"stream":true,"model"'),
    );
    expect(up.query).toBe('beta=true');
    expect(up.headers['anthropic-beta']).toBe('context-management-2025-06-27');
    expect(up.headers['anthropic-version']).toBe('2023-06-01');
    // Only the allow-listed protocol headers travel: never the client's credentials or cookies.
    expect(up.headers.cookie).toBeUndefined();
    expect(up.headers['x-api-key']).toBeUndefined();
    expect(up.headers.authorization).toBeUndefined();
  });

  it('max_tokens is required: 400 in Anthropic error shape, nothing held', async () => {
    const id = rid('m-nomax');
    const err = await client.messages
      .create({ model: 'sim-claude', messages: [{ role: 'user', content: 'x' }] } as never, withRequestId(id))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(/max_tokens/) },
    });
    expect(billing.quotes.has(id)).toBe(false);
  });

  it('an OpenAI-protocol model answers too, translated (see translation.test.ts)', async () => {
    const msg = await client.messages.create({ model: 'sim-gpt', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
    expect(msg).toMatchObject({ type: 'message', model: 'sim-gpt', stop_reason: expect.stringMatching(/end_turn|max_tokens/) });
  });

  it("passes the upstream's 429 through with retry-after and its own body", async () => {
    const id = rid('m-429');
    const err = await client.messages
      .create({ model: 'sim-claude', max_tokens: 10, messages: [{ role: 'user', content: '[sim:429]' }] }, withRequestId(id))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const e = err as InstanceType<typeof Anthropic.RateLimitError>;
    expect(e.headers.get('retry-after')).toBe('7');
    expect(e.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error', httpStatus: 429 });
  });

  it("the upstream's in-stream error event reaches the client as the end of the stream", async () => {
    const id = rid('m-fail');
    const stream = client.messages.stream({ model: 'sim-claude', max_tokens: 100, messages: [{ role: 'user', content: '[sim:fail] go' }] }, withRequestId(id));
    let text = '';
    stream.on('text', (t) => (text += t));
    await expect(stream.finalMessage()).rejects.toMatchObject({ error: { type: 'error', error: { type: 'overloaded_error' } } });
    expect(text.length).toBeGreaterThan(0);
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error', usageSource: 'estimated' });
  });

  it('a stream cut by the upstream ends with an Anthropic error event, billed on what was seen', async () => {
    const id = rid('m-cut');
    const stream = client.messages.stream({ model: 'sim-claude', max_tokens: 100, messages: [{ role: 'user', content: '[sim:cut] go' }] }, withRequestId(id));
    let text = '';
    stream.on('text', (t) => (text += t));
    await expect(stream.finalMessage()).rejects.toMatchObject({
      error: { type: 'error', error: { type: 'api_error', message: expect.stringMatching(/upstream stream failed/) } },
    });
    expect(text.length).toBeGreaterThan(0);
    const s = billing.settled(id);
    expect(s.status).toBe('upstream_error');
    expect(s.usageSource).toBe('estimated');
    expect(s.usage!.inputTokens).toBeGreaterThan(0); // message_start's reported input tokens are kept
  });

  it('a client disconnect aborts the upstream at once and settles once, as cancelled', async () => {
    const id = rid('m-abort');
    stack.sim.context.chunkDelayMs = 2;
    try {
      const stream = client.messages.stream(
        { model: 'sim-claude', max_tokens: 100_000, messages: [{ role: 'user', content: '[sim:tokens=5000] long' }] },
        withRequestId(id),
      );
      const ended = stream.finalMessage().catch((e: unknown) => e);
      await new Promise<void>((resolve) => stream.once('text', () => resolve()));
      stream.abort();
      expect(await ended).toBeInstanceOf(Anthropic.APIUserAbortError);
      const rec = upstreamOf(stack.sim, id);
      await waitFor(() => rec.aborted, 5000, 'the simulator to see the abort');
      expect(rec.completed).toBe(false);
      const s = await billing.waitSettled(id);
      expect(s.status).toBe('cancelled');
      expect(s.usage!.inputTokens).toBeGreaterThan(0);
      expect(s.usage!.outputTokens).toBeGreaterThan(0);
    } finally {
      stack.sim.context.chunkDelayMs = 0;
    }
  });

  it('the final event reaches the client only after settlement', async () => {
    const id = rid('m-order');
    billing.settleDelayMs = 150;
    try {
      const msg = await client.messages
        .stream({ model: 'sim-claude', max_tokens: 100, messages: [{ role: 'user', content: 'order' }] }, withRequestId(id))
        .finalMessage();
      const doneAt = Date.now();
      expect(msg.stop_reason).toBe('end_turn');
      expect(doneAt).toBeGreaterThanOrEqual(billing.settlements.get(id)![0]!.at);
    } finally {
      billing.settleDelayMs = 0;
    }
  });
});

describe('POST /v1/messages/count_tokens', () => {
  it('is forwarded to an Anthropic backend and equals what the upstream counts', async () => {
    const params = { model: 'sim-claude', messages: [{ role: 'user' as const, content: 'count these words please' }], system: 'be brief' };
    const { data, response } = await client.messages.countTokens(params).withResponse();
    expect(data.input_tokens).toBeGreaterThan(0);
    expect(response.headers.get('x-tollgate-token-count')).toBeNull();
    const direct = await fetch(`${stack.sim.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ ...params, model: 'claude-sim' }),
    });
    expect(((await direct.json()) as { input_tokens: number }).input_tokens).toBe(data.input_tokens);
  });

  it('is estimated, and marked so, for a backend without count_tokens', async () => {
    const { data, response } = await client.messages
      .countTokens({ model: 'claude-nocount', messages: [{ role: 'user', content: 'x'.repeat(400) }] })
      .withResponse();
    expect(data.input_tokens).toBeGreaterThanOrEqual(100);
    expect(response.headers.get('x-tollgate-token-count')).toBe('estimated');
  });

  it('a model outside the group is 404 in Anthropic shape', async () => {
    await expect(client.messages.countTokens({ model: 'nope', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 404,
      error: { error: { type: 'not_found_error' } },
    });
  });
});

describe('GET /v1/models', () => {
  it("answers in Anthropic's list shape to the Anthropic SDK and OpenAI's otherwise", async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(['claude-nocount', 'sim-claude', 'sim-gpt']);
    expect(page.data[0]).toMatchObject({ type: 'model', display_name: 'claude-nocount' });
    const one = await client.models.retrieve('sim-claude');
    expect(one).toMatchObject({ type: 'model', id: 'sim-claude' });
    await expect(client.models.retrieve('nope')).rejects.toMatchObject({ status: 404 });
    const r = await fetch(`${stack.gw.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(await r.json()).toMatchObject({ object: 'list', data: [{ id: 'claude-nocount', object: 'model' }, { id: 'sim-claude' }, { id: 'sim-gpt' }] });
  });
});
