import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadPort } from '../support/ports.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, waitFor, type Stack } from '../support/stack.js';
import { RecordingBilling, rid, withRequestId } from './support.js';

const KEY = 'sk-service-chat-test';
const billing = new RecordingBilling();
let stack: Stack;
let client: OpenAI;

beforeAll(async () => {
  const dead = await deadPort();
  stack = await startStack(
    (sim) => [
      chatRoute('sim-gpt', `${sim}/v1`, { backend: { model: 'gpt-sim' } }),
      chatRoute('other', `${sim}/v1`),
      chatRoute('unreachable', `http://127.0.0.1:${dead}/v1`),
      chatRoute('impatient', `${sim}/v1`, { backend: { timeoutSeconds: 1 } }),
      group('g', ['sim-gpt', 'unreachable', 'impatient']),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
  client = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
});
afterAll(() => stack.close());

describe('POST /v1/chat/completions through the gateway (openai SDK)', () => {
  it('non-streaming: the upstream answer with usage, the model rewritten upstream only', async () => {
    const marker = `m-${Date.now()}`;
    const r = await client.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: `hello ${marker}` }] });
    expect(r.object).toBe('chat.completion');
    expect(r.choices[0]!.message.content).toMatch(/\.$/);
    expect(r.usage!.completion_tokens).toBe(12);
    const seen = stack.sim.recorder.find(marker);
    expect(seen).toHaveLength(1);
    const upstream = JSON.parse(seen[0]!.body.toString()) as Record<string, unknown>;
    expect(upstream.model).toBe('gpt-sim');
    expect(upstream.stream).toBeUndefined();
    expect(seen[0]!.headers.authorization).toBeUndefined(); // the client's key never travels
  });

  it('streaming: chunks arrive as sent, the last content frame carries usage, [DONE] ends it', async () => {
    const marker = `s-${Date.now()}`;
    const id = rid('c-stream');
    const s = await client.chat.completions.create(
      { model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: `hi ${marker}` }] },
      withRequestId(id),
    );
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of s) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.split(' ')).toHaveLength(12);
    expect(usage?.completion_tokens).toBe(12);
    expect(billing.settled(id)).toMatchObject({ status: 'ok', usageSource: 'reported', usage: { inputTokens: usage!.prompt_tokens, outputTokens: 12 } });
    const upstream = JSON.parse(stack.sim.recorder.find(marker)[0]!.body.toString()) as { stream_options: { include_usage: boolean } };
    expect(upstream.stream_options.include_usage).toBe(true);
  });

  it('keeps unknown fields byte-equal on the way upstream', async () => {
    const marker = `x-${Date.now()}`;
    const body = `{"model":"sim-gpt","stream":false,"messages":[{"role":"user","content":"${marker}"}],"x_vendor":{"a":1.50,"b":"\\u00e9"},"temperature":0.70}`;
    const r = await fetch(`${stack.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body,
    });
    expect(r.status).toBe(200);
    // Byte for byte but for the model and the output cap the hold was sized for (the client sent none).
    expect(stack.sim.recorder.find(marker)[0]!.body.toString()).toBe(`{"max_completion_tokens":4096,${body.slice(1).replace('"sim-gpt"', '"gpt-sim"')}`);
  });

  it('a model outside the group is 404 and an invalid body 400, in the OpenAI error shape', async () => {
    await expect(client.chat.completions.create({ model: 'other', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 404,
      type: 'invalid_request_error',
    });
    await expect(client.chat.completions.create({ model: 'sim-gpt' } as never)).rejects.toMatchObject({ status: 400, param: 'messages' });
  });

  it("passes the upstream's 429 through with its retry-after", async () => {
    const err = await client.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: '[sim:429]' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
  });

  it('a stream cut by the upstream ends with an error frame the SDK raises', async () => {
    const s = await client.chat.completions.create({ model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: '[sim:cut] please' }] });
    let text = '';
    const read = async () => {
      for await (const chunk of s) text += chunk.choices[0]?.delta.content ?? '';
    };
    await expect(read()).rejects.toThrow(/upstream stream failed/);
    expect(text.length).toBeGreaterThan(0);
  });

  it('a client disconnect aborts the upstream request', async () => {
    const marker = `d-${Date.now()}`;
    const ac = new AbortController();
    stack.sim.context.chunkDelayMs = 2;
    const s = await client.chat.completions.create(
      { model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: `[sim:tokens=5000] ${marker}` }] },
      { signal: ac.signal },
    );
    try {
      const it = s[Symbol.asyncIterator]();
      await it.next();
      ac.abort();
      const rec = stack.sim.recorder.find(marker)[0]!;
      await waitFor(() => rec.aborted, 5000, 'the simulator to see the abort');
      expect(rec.completed).toBe(false);
    } finally {
      stack.sim.context.chunkDelayMs = 0;
    }
  });

  it('a client disconnect before the first byte aborts the upstream request', async () => {
    const marker = `d0-${Date.now()}`;
    const ac = new AbortController();
    const pending = client.chat.completions
      .create({ model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: `[sim:slow=10000] ${marker}` }] }, { signal: ac.signal })
      .catch((err: Error) => err);
    await waitFor(() => stack.sim.recorder.find(marker).length === 1, 5000, 'the upstream request');
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    const rec = stack.sim.recorder.find(marker)[0]!;
    await waitFor(() => rec.aborted, 5000, 'the simulator to see the abort');
    expect(rec.completed).toBe(false);
  });

  it('tool call round trip with streamed arguments; the tool message reaches the upstream unchanged', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: 'function',
        function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] } },
      },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'add 1 and 1' }];
    const s = await client.chat.completions.create({ model: 'sim-gpt', stream: true, tools, tool_choice: 'required', messages });
    let args = '';
    let name = '';
    let callId = '';
    let finish: string | null = null;
    for await (const chunk of s) {
      const call = chunk.choices[0]?.delta.tool_calls?.[0];
      if (call?.function?.name) name = call.function.name;
      if (call?.id) callId = call.id;
      args += call?.function?.arguments ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(name).toBe('add');
    expect(JSON.parse(args)).toEqual({ a: 1, b: 1 });
    messages.push(
      { role: 'assistant', content: null, tool_calls: [{ id: callId, type: 'function', function: { name, arguments: args } }] },
      { role: 'tool', tool_call_id: callId, content: '2' },
    );
    const id = rid('c-tool');
    const r = await client.chat.completions.create({ model: 'sim-gpt', tools, messages }, withRequestId(id));
    expect(r.choices[0]!.finish_reason).toBe('stop');
    expect(r.choices[0]!.message.content).toMatch(/\.$/);
    const up = stack.sim.recorder.all().find((x) => x.headers['x-request-id'] === id)!;
    expect((JSON.parse(up.body.toString()) as { messages: unknown[] }).messages).toEqual(messages);
  });

  it("the upstream's in-stream error frame ends the stream and the SDK raises it", async () => {
    const id = rid('c-fail');
    const s = await client.chat.completions.create(
      { model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: '[sim:fail] go' }] },
      withRequestId(id),
    );
    const read = async () => {
      for await (const _ of s) void _;
    };
    await expect(read()).rejects.toThrow(/simulated/);
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error', usageSource: 'estimated' });
  });

  it('an unreachable upstream is 502 and a slow one 504, in the OpenAI error shape, settled once', async () => {
    const id = rid('c-502');
    await expect(client.chat.completions.create({ model: 'unreachable', messages: [{ role: 'user', content: 'x' }] }, withRequestId(id))).rejects.toMatchObject(
      {
        status: 502,
        code: 'upstream_unavailable',
        type: 'api_error',
      },
    );
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error', httpStatus: 502 });
    await expect(client.chat.completions.create({ model: 'impatient', messages: [{ role: 'user', content: '[sim:slow=1500] x' }] })).rejects.toMatchObject({
      status: 504,
      code: 'upstream_timeout',
    });
  });
});
