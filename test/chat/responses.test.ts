import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, waitFor, type Stack } from '../support/stack.js';
import { RecordingBilling, rid, upstreamOf, withRequestId } from './support.js';

const KEY = 'sk-service-responses-test';
const billing = new RecordingBilling();
let stack: Stack;
let client: OpenAI;

beforeAll(async () => {
  stack = await startStack(
    (sim) => [
      chatRoute('sim-gpt', `${sim}/v1`, { backend: { model: 'gpt-sim' } }),
      chatRoute('sim-claude', sim, { backend: { provider: 'anthropic' } }),
      group('g', ['sim-gpt', 'sim-claude']),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
  client = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
});
afterAll(() => stack.close());

const tools: OpenAI.Responses.FunctionTool[] = [
  {
    type: 'function',
    name: 'lookup',
    description: 'Look a word up',
    strict: true,
    parameters: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'], additionalProperties: false },
  },
];

describe('POST /v1/responses through the gateway (openai SDK)', () => {
  it('non-streaming: output_text and usage, settled as reported, model rewritten upstream', async () => {
    const id = rid('r-json');
    const r = await client.responses.create({ model: 'sim-gpt', input: 'Hello there' }, withRequestId(id));
    expect(r.object).toBe('response');
    expect(r.status).toBe('completed');
    expect(r.output_text).toMatch(/\.$/);
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as Record<string, unknown>;
    expect(up.model).toBe('gpt-sim');
    expect(up.stream).toBeUndefined();
    expect(billing.settled(id)).toMatchObject({
      status: 'ok',
      usageSource: 'reported',
      usage: { inputTokens: r.usage!.input_tokens, cachedInputTokens: 0, outputTokens: r.usage!.output_tokens, reasoningTokens: 0 },
    });
  });

  it('streaming: the real event sequence, reasoning summary and usage with cached and reasoning tokens', async () => {
    const input: OpenAI.Responses.ResponseInput = [
      { role: 'developer', content: 'You are terse.' },
      { role: 'user', content: 'first turn' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'second turn' },
    ];
    const ask = (id: string) =>
      client.responses.create(
        { model: 'sim-gpt', input, stream: true, reasoning: { effort: 'low', summary: 'auto' }, include: ['reasoning.encrypted_content'], store: false },
        withRequestId(id),
      );
    for await (const _ of await ask(rid('r-warm'))) void _; // writes the prompt cache
    const id = rid('r-stream');
    const types: string[] = [];
    let text = '';
    let done: OpenAI.Responses.Response | undefined;
    for await (const ev of await ask(id)) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') done = ev.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types[1]).toBe('response.in_progress');
    expect(types).toContain('response.reasoning_summary_text.delta');
    expect(types.at(-1)).toBe('response.completed');
    const message = done!.output.find((o): o is OpenAI.Responses.ResponseOutputMessage => o.type === 'message')!;
    expect(text).toBe((message.content[0] as OpenAI.Responses.ResponseOutputText).text);
    const u = done!.usage!;
    expect(u.input_tokens_details.cached_tokens).toBeGreaterThan(0);
    expect(u.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    expect(billing.settled(id)).toMatchObject({
      usageSource: 'reported',
      usage: {
        inputTokens: u.input_tokens,
        cachedInputTokens: u.input_tokens_details.cached_tokens,
        outputTokens: u.output_tokens,
        reasoningTokens: u.output_tokens_details.reasoning_tokens,
      },
    });
  });

  it('function call round trip with streamed arguments', async () => {
    const stream = await client.responses.create({ model: 'sim-gpt', input: 'define gateway', tools, tool_choice: 'required', stream: true });
    let args = '';
    let call: OpenAI.Responses.ResponseFunctionToolCall | undefined;
    for await (const ev of stream) {
      if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
      if (ev.type === 'response.output_item.done' && ev.item.type === 'function_call') call = ev.item;
    }
    expect(call!.name).toBe('lookup');
    expect(args).toBe(call!.arguments);
    expect(JSON.parse(args)).toEqual({ word: 'define gateway' });
    const r = await client.responses.create({
      model: 'sim-gpt',
      tools,
      input: [{ role: 'user', content: 'define gateway' }, call!, { type: 'function_call_output', call_id: call!.call_id, output: 'a gate with a toll' }],
    });
    expect(r.output[0]!.type).toBe('message');
    expect(r.output_text.length).toBeGreaterThan(0);
  });

  it('unknown fields reach the upstream byte-equal', async () => {
    const id = rid('r-raw');
    const body = `{"model":"sim-gpt","input":[{"role":"user","content":"hi"}],"stream":false,"prompt_cache_key":"k1","client_metadata":{"a":"\\u00e9"},"x_num":2.50}`;
    const r = await fetch(`${stack.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': id },
      body,
    });
    expect(r.status).toBe(200);
    // Byte for byte but for the model and the output cap the hold was sized for (the client sent none).
    expect(upstreamOf(stack.sim, id).body.toString()).toBe(`{"max_output_tokens":4096,${body.slice(1).replace('"sim-gpt"', '"gpt-sim"')}`);
  });

  it('an invalid body is a 400 naming the field, and nothing is held', async () => {
    const id = rid('r-bad');
    await expect(client.responses.create({ model: 'sim-gpt', input: 5 } as never, withRequestId(id))).rejects.toMatchObject({
      status: 400,
      param: 'input',
      type: 'invalid_request_error',
    });
    await expect(client.responses.create({ input: 'x' } as never, withRequestId(id))).rejects.toMatchObject({ status: 400, param: 'model' });
    expect(billing.quotes.has(id)).toBe(false);
  });

  it("passes the upstream's 429 through with retry-after", async () => {
    const err = await client.responses.create({ model: 'sim-gpt', input: '[sim:429]' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
  });

  it("the upstream's response.failed reaches the client as the end of the stream", async () => {
    const id = rid('r-fail');
    const types: string[] = [];
    for await (const ev of await client.responses.create({ model: 'sim-gpt', input: '[sim:fail] go', stream: true }, withRequestId(id))) types.push(ev.type);
    expect(types).toContain('response.output_text.delta');
    expect(types.at(-1)).toBe('response.failed');
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error' });
  });

  it('a stream cut by the upstream ends with an error event the SDK raises', async () => {
    const id = rid('r-cut');
    const s = await client.responses.create({ model: 'sim-gpt', input: '[sim:cut] go', stream: true }, withRequestId(id));
    let text = '';
    const read = async () => {
      for await (const ev of s) if (ev.type === 'response.output_text.delta') text += ev.delta;
    };
    await expect(read()).rejects.toThrow(/upstream stream failed/);
    expect(text.length).toBeGreaterThan(0);
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error', usageSource: 'estimated' });
  });

  it('a client disconnect aborts the upstream', async () => {
    const id = rid('r-abort');
    const ac = new AbortController();
    stack.sim.context.chunkDelayMs = 2;
    try {
      const s = await client.responses.create({ model: 'sim-gpt', input: '[sim:tokens=5000] long', stream: true }, { ...withRequestId(id), signal: ac.signal });
      for await (const ev of s) if (ev.type === 'response.output_text.delta') break;
      ac.abort();
      const rec = upstreamOf(stack.sim, id);
      await waitFor(() => rec.aborted, 5000, 'the simulator to see the abort');
      expect(rec.completed).toBe(false);
      expect(await billing.waitSettled(id)).toMatchObject({ status: 'cancelled', usageSource: 'estimated' });
    } finally {
      stack.sim.context.chunkDelayMs = 0;
    }
  });

  it('an Anthropic-protocol model answers too, translated (see translation.test.ts)', async () => {
    const r = await client.responses.create({ model: 'sim-claude', input: 'x' });
    expect(r).toMatchObject({ object: 'response', status: 'completed', model: 'sim-claude' });
  });
});
