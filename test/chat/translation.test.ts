import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadPort } from '../support/ports.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { RecordingBilling, rid, upstreamOf, withRequestId } from './support.js';

/**
 * Any chat endpoint reaches any chat model: the official SDKs against a backend that speaks the
 * other protocol (the simulator serves each model through its own protocol only), JSON and SSE,
 * tools across a full loop, errors in the client's shape, usage charged as the upstream reported.
 */
const KEY = 'sk-service-translation-test';
const KEY2 = 'sk-service-translation-test-2';
const billing = new RecordingBilling();
let stack: Stack;
let openai: OpenAI;
let anthropic: Anthropic;

const WEATHER = {
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

beforeAll(async () => {
  const dead = await deadPort();
  stack = await startStack(
    (sim) => [
      chatRoute('claude-only', sim, { backend: { provider: 'anthropic', model: 'claude-sim' } }),
      chatRoute('gpt-only', `${sim}/v1`, { backend: { model: 'gpt-sim' } }),
      // An OpenAI-compatible server speaks Chat Completions only: Responses clients reach it translated.
      chatRoute('compat-only', `${sim}/v1`, { backend: { provider: 'openai-compatible', model: 'gpt-sim' } }),
      // A server whose only chat path is Responses (as a codex model at OpenAI).
      chatRoute('responses-only', `${sim}/v1`, { backend: { provider: 'openai-compatible', model: 'gpt-sim', paths: { responses: '/responses' } } }),
      {
        ...chatRoute('claude-then-gpt', sim),
        spec: {
          type: 'chat',
          backends: [
            { provider: 'anthropic', baseURL: `http://127.0.0.1:${dead}`, model: 'claude-dead', priority: 0 },
            { provider: 'openai', baseURL: `${sim}/v1`, model: 'gpt-sim', priority: 1 },
          ],
          pricing: { inputPerMillion: '1', outputPerMillion: '2' },
        },
      },
      // An OpenAI model whose tokenizer is public: count_tokens counts with it.
      chatRoute('gpt-41', `${sim}/v1`, { backend: { model: 'gpt-4.1-mini' } }),
      group('g', ['claude-only', 'gpt-only', 'compat-only', 'responses-only', 'claude-then-gpt', 'gpt-41']),
      apiKey('k', KEY, 'g'),
      apiKey('k2', KEY2, 'g'),
    ],
    { billing: billing.factory },
  );
  openai = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: stack.gw.url, apiKey: null, authToken: KEY, maxRetries: 0 });
});
afterAll(() => stack.close());

describe('openai SDK (Chat Completions) against a Messages-only model', () => {
  it('JSON: the answer in the Chat Completions shape under the gateway model code, usage charged as the upstream reported it', async () => {
    const id = rid('t-cc-json');
    const c = await openai.chat.completions.create(
      {
        model: 'claude-only',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hello there' },
        ],
        seed: 7,
      },
      withRequestId(id),
    );
    expect(c.object).toBe('chat.completion');
    expect(c.model).toBe('claude-only');
    expect(c.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(c.choices[0]!.finish_reason).toBe('stop');
    // What the upstream got: Anthropic's wire, with the system prompt and the cap the hold was sized for.
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as Record<string, unknown>;
    expect(up).toMatchObject({
      model: 'claude-sim',
      system: 'Be brief.',
      max_tokens: 4096,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello there' }] }],
    });
    const s = billing.settled(id);
    expect(s).toMatchObject({ status: 'ok', usageSource: 'reported', upstreamModel: 'claude-sim' });
    expect(c.usage!.prompt_tokens).toBe(s.usage!.inputTokens);
    expect(c.usage!.completion_tokens).toBe(s.usage!.outputTokens);
  });

  it("a temperature over Anthropic's 1 is sent as 1 (the OpenAI protocols take up to 2)", async () => {
    const id = rid('t-cc-temp');
    await openai.chat.completions.create({ model: 'claude-only', messages: [{ role: 'user', content: 'hi' }], temperature: 1.5 }, withRequestId(id));
    expect(JSON.parse(upstreamOf(stack.sim, id).body.toString())).toMatchObject({ temperature: 1 });
  });

  it('a hint the backend cannot take is dropped and named in x-tollgate-dropped-fields; one that changes the answer is a 400 naming it', async () => {
    const { response } = await openai.chat.completions
      .create({ model: 'claude-only', messages: [{ role: 'user', content: 'hi' }], seed: 1, store: true })
      .withResponse();
    expect(response.headers.get('x-tollgate-dropped-fields')).toBe('seed, store');
    const err = await openai.chat.completions.create({ model: 'claude-only', n: 2, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, param: 'n' });
  });

  it('SSE: deltas in order, the usage chunk (not asked for: the contract has the last content frame carry usage, as passthrough does), [DONE]; charged on the reported usage', async () => {
    const id = rid('t-cc-sse');
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null | undefined;
    const stream = await openai.chat.completions.create(
      { model: 'claude-only', stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] },
      withRequestId(id),
    );
    for await (const chunk of stream) {
      expect(chunk.model).toBe('claude-only');
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(finish).toBe('stop');
    const s = billing.settled(id);
    expect(s).toMatchObject({ status: 'ok', usageSource: 'reported' });
    expect(usage).toMatchObject({ prompt_tokens: s.usage!.inputTokens, completion_tokens: s.usage!.outputTokens });
  });

  it('a tool loop: the call (streamed arguments reassembled), the result, the next answer', async () => {
    const tools = [{ type: 'function' as const, function: WEATHER }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris? [sim:tool]' }];
    const stream = await openai.chat.completions.create({ model: 'claude-only', stream: true, tools, messages });
    const calls = new Map<number, { id: string; name: string; args: string }>();
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        const c = calls.get(tc.index) ?? { id: '', name: '', args: '' };
        c.id ||= tc.id ?? '';
        c.name ||= tc.function?.name ?? '';
        c.args += tc.function?.arguments ?? '';
        calls.set(tc.index, c);
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    const call = calls.get(0)!;
    expect(call.name).toBe('get_weather');
    expect(JSON.parse(call.args)).toHaveProperty('city');
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: call.name, arguments: call.args } }] });
    messages.push({ role: 'tool', tool_call_id: call.id, content: 'sunny, 21 C' });
    const id = rid('t-cc-tool2');
    const next = await openai.chat.completions.create({ model: 'claude-only', tools, messages }, withRequestId(id));
    expect(next.choices[0]!.finish_reason).toBe('stop');
    expect(next.choices[0]!.message.content!.length).toBeGreaterThan(0);
    // The result went back as Anthropic's tool_result, answering the tool_use it came from.
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as {
      messages: { role: string; content: { type: string; tool_use_id?: string; id?: string }[] }[];
    };
    expect(up.messages.map((m) => m.content.map((b) => b.type))).toEqual([['text'], ['tool_use'], ['tool_result']]);
    expect(up.messages[2]!.content[0]!.tool_use_id).toBe(up.messages[1]!.content[0]!.id);
  });

  it("an upstream 429 keeps its status and retry-after, in OpenAI's error shape", async () => {
    const err = await openai.chat.completions.create({ model: 'claude-only', messages: [{ role: 'user', content: '[sim:429]' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).error).toMatchObject({ type: 'rate_limit_error' });
  });
});

describe('@anthropic-ai/sdk (Messages) against a Chat-Completions-only model', () => {
  it('JSON: the answer in the Messages shape, usage as the upstream reported it', async () => {
    const id = rid('t-m-json');
    const msg = await anthropic.messages.create(
      {
        model: 'gpt-only',
        max_tokens: 200,
        system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: 'Hello' }],
      },
      withRequestId(id),
    );
    expect(msg).toMatchObject({ type: 'message', role: 'assistant', model: 'gpt-only', stop_reason: 'end_turn' });
    expect(msg.content[0]!.type).toBe('text');
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as Record<string, unknown>;
    expect(up).toMatchObject({
      model: 'gpt-sim',
      max_completion_tokens: 200,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello' },
      ],
    });
    const s = billing.settled(id);
    expect(s).toMatchObject({ status: 'ok', usageSource: 'reported' });
    expect(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0)).toBe(s.usage!.inputTokens);
    expect(msg.usage.output_tokens).toBe(s.usage!.outputTokens);
  });

  it('the stream helper: text deltas, the final message with usage; Claude Code mid-conversation system messages join the instructions', async () => {
    const id = rid('t-m-sse');
    const stream = anthropic.messages.stream(
      {
        model: 'gpt-only',
        max_tokens: 300,
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello!' },
          { role: 'system' as 'user', content: 'Answer in English.' },
          { role: 'user', content: 'Tell me more' },
        ],
      },
      withRequestId(id),
    );
    let text = '';
    stream.on('text', (t) => (text += t));
    const final = await stream.finalMessage();
    expect(text.length).toBeGreaterThan(0);
    expect(final.content.map((b) => b.type)).toEqual(['text']);
    expect(final.stop_reason).toBe('end_turn');
    const s = billing.settled(id);
    expect(s).toMatchObject({ status: 'ok', usageSource: 'reported' });
    expect(final.usage.output_tokens).toBe(s.usage!.outputTokens);
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as { messages: { role: string }[] };
    expect(up.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
  });

  it('tools: a streamed tool_use with its input, then the tool_result turn gets an answer', async () => {
    const tools = [{ name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema }];
    const first = await anthropic.messages
      .stream({ model: 'gpt-only', max_tokens: 300, tools, messages: [{ role: 'user', content: 'Weather in Oslo? [sim:tool]' }] })
      .finalMessage();
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use).toMatchObject({ name: 'get_weather', input: { city: expect.any(String) } });
    const next = await anthropic.messages.create({
      model: 'gpt-only',
      max_tokens: 300,
      tools,
      messages: [
        { role: 'user', content: 'Weather in Oslo? [sim:tool]' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'snow, -3 C' }] },
      ],
    });
    expect(next.stop_reason).toBe('end_turn');
    expect(next.content[0]!.type).toBe('text');
  });

  it("Claude Code's max_tokens: 1 probe to a Responses-only backend goes as 16, Responses' least, and is held for 16", async () => {
    const id = rid('t-msg-probe');
    const msg = await anthropic.messages.create({ model: 'responses-only', max_tokens: 1, messages: [{ role: 'user', content: 'quota' }] }, withRequestId(id));
    expect(msg.type).toBe('message');
    expect(JSON.parse(upstreamOf(stack.sim, id).body.toString())).toMatchObject({ max_output_tokens: 16 });
    expect(billing.quotes.get(id)!.maxOutputTokens).toBe(16);
  });

  it('fails over across protocols: an unreachable Anthropic backend, then an OpenAI one, translated', async () => {
    const id = rid('t-failover');
    const msg = await anthropic.messages.create({ model: 'claude-then-gpt', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }, withRequestId(id));
    expect(msg.content[0]!.type).toBe('text');
    expect(billing.settled(id)).toMatchObject({ status: 'ok', upstreamModel: 'gpt-sim' });
  });

  it("an upstream 500 on the last backend is a 500 in Anthropic's shape, and nothing is charged for it", async () => {
    const id = rid('t-m-500');
    const err = await anthropic.messages
      .create({ model: 'gpt-only', max_tokens: 10, messages: [{ role: 'user', content: '[sim:500]' }] }, withRequestId(id))
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 500, error: { type: 'error', error: { type: 'api_error' } } });
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error', usage: null });
  });

  it("an error inside the upstream's stream ends the stream with an error event of Anthropic's own types (OpenAI's server_error is api_error)", async () => {
    const id = rid('t-m-fail');
    const stream = anthropic.messages.stream({ model: 'gpt-only', max_tokens: 100, messages: [{ role: 'user', content: '[sim:fail] go' }] }, withRequestId(id));
    await expect(stream.finalMessage()).rejects.toMatchObject({
      error: { type: 'error', error: { type: 'api_error', message: expect.stringMatching(/simulated/) } },
    });
    expect(billing.settled(id)).toMatchObject({ status: 'upstream_error', usageSource: 'estimated' });
  });
});

describe('openai SDK (Responses, as Codex speaks it) against a Messages-only model', () => {
  it('JSON: developer instructions, the answer as a message item, usage as the upstream reported it', async () => {
    const id = rid('t-r-json');
    const r = await openai.responses.create(
      {
        model: 'claude-only',
        store: false,
        input: [
          { role: 'developer', content: 'You are a coding agent.' },
          { role: 'user', content: [{ type: 'input_text', text: 'Hello' }] },
        ],
      },
      withRequestId(id),
    );
    expect(r).toMatchObject({ object: 'response', status: 'completed', model: 'claude-only' });
    expect(r.output_text.length).toBeGreaterThan(0);
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as Record<string, unknown>;
    expect(up).toMatchObject({ model: 'claude-sim', system: 'You are a coding agent.' });
    const s = billing.settled(id);
    expect(s).toMatchObject({ status: 'ok', usageSource: 'reported' });
    expect(r.usage).toMatchObject({ input_tokens: s.usage!.inputTokens, output_tokens: s.usage!.outputTokens });
  });

  it('SSE: every event has its type and a rising sequence_number, ending in response.completed with usage', async () => {
    const r = await fetch(`${stack.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ model: 'claude-only', stream: true, input: 'Tell me a story', reasoning: { effort: 'low', summary: 'auto' } }),
    });
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = (await r.text())
      .split('\n\n')
      .filter((e) => e.includes('data: '))
      .map((e) => ({ event: /^event: (.+)$/m.exec(e)?.[1], data: JSON.parse(/^data: (.+)$/m.exec(e)![1]!) as { type: string; sequence_number: number } }));
    events.forEach((e, i) => {
      expect(e.data.type).toBe(e.event);
      expect(e.data.sequence_number).toBe(i);
    });
    const types = events.map((e) => e.data.type);
    expect(types[0]).toBe('response.created');
    expect(types).toContain('response.output_text.delta');
    expect(types).toContain('response.reasoning_summary_text.delta'); // reasoning asked for, and the upstream thought
    expect(types.at(-1)).toBe('response.completed');
    expect((events.at(-1)!.data as unknown as { response: { usage: { output_tokens: number } } }).response.usage.output_tokens).toBeGreaterThan(0);
  });

  it("medium effort with no cap of the client's own (as Codex asks) thinks within the model's cap, and the answer carries the reasoning", async () => {
    const id = rid('t-resp-effort');
    const r = await openai.responses.create(
      { model: 'claude-only', input: 'Tell me a story', reasoning: { effort: 'medium', summary: 'auto' } },
      withRequestId(id),
    );
    // medium is 8,192 thinking tokens: over the route's 4,096, so the budget is the cap less one
    expect(JSON.parse(upstreamOf(stack.sim, id).body.toString())).toMatchObject({ max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 4095 } });
    expect(r.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
  });

  it("Claude's refusal is an incomplete response for content_filter, streamed and not; Chat Completions clients get finish_reason content_filter", async () => {
    const input = 'Tell me a story [sim:refusal]';
    const r = await openai.responses.create({ model: 'claude-only', input });
    expect(r).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'content_filter' } });
    const stream = openai.responses.stream({ model: 'claude-only', input });
    const types: string[] = [];
    for await (const e of stream) types.push(e.type);
    expect(types.at(-1)).toBe('response.incomplete');
    expect(await stream.finalResponse()).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'content_filter' } });
    const c = await openai.chat.completions.create({ model: 'claude-only', messages: [{ role: 'user', content: input }] });
    expect(c.choices[0]!.finish_reason).toBe('content_filter');
  });

  it('a message the answer stopped inside is incomplete, not completed: cut by the cap, or by an error in the stream', async () => {
    const cut = await openai.responses.create({ model: 'claude-only', input: 'Tell me a story [sim:tokens=50]', max_output_tokens: 20 });
    expect(cut).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output: [{ type: 'message', status: 'incomplete' }],
    });
    const done: { type: string; status?: string }[] = [];
    let failed: { status: string; output: { status?: string }[] } | undefined;
    for await (const e of await openai.responses.create({ model: 'claude-only', input: 'go [sim:fail]', stream: true })) {
      if (e.type === 'response.output_item.done') done.push(e.item as { type: string; status?: string });
      if (e.type === 'response.failed') failed = e.response as unknown as typeof failed;
    }
    expect(done).toMatchObject([{ type: 'message', status: 'incomplete' }]);
    expect(failed).toMatchObject({ status: 'failed', output: [{ status: 'incomplete' }] });
  });

  it("a function tool loop and a custom (freeform) tool, as Codex's apply_patch: calls as function_call / custom_tool_call items", async () => {
    const tools: OpenAI.Responses.Tool[] = [
      { type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: WEATHER.parameters, strict: false },
      { type: 'web_search' },
    ];
    const first = await openai.responses.create({ model: 'claude-only', tools, input: 'Weather in Rome? [sim:tool]' });
    const call = first.output.find((o) => o.type === 'function_call')!;
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather' });
    expect(JSON.parse((call as { arguments: string }).arguments)).toHaveProperty('city');
    const next = await openai.responses.create({
      model: 'claude-only',
      tools,
      input: [
        { role: 'user', content: 'Weather in Rome? [sim:tool]' },
        { type: 'function_call', call_id: (call as { call_id: string }).call_id, name: 'get_weather', arguments: (call as { arguments: string }).arguments },
        { type: 'function_call_output', call_id: (call as { call_id: string }).call_id, output: 'warm' },
      ],
    });
    expect(next.status).toBe('completed');
    expect(next.output_text.length).toBeGreaterThan(0);
    const patch = await openai.responses.create({
      model: 'claude-only',
      tools: [{ type: 'custom', name: 'apply_patch', description: 'Apply a patch' }],
      input: 'Fix it [sim:tool]',
    });
    const custom = patch.output.find((o) => o.type === 'custom_tool_call');
    expect(custom).toMatchObject({ type: 'custom_tool_call', name: 'apply_patch', input: expect.any(String) });
  });

  it('previous_response_id on a non-OpenAI backend: the gateway keeps the conversation it translated, for this key, and continues it', async () => {
    const first = await openai.responses.create({ model: 'claude-only', instructions: 'Be brief.', input: 'My name is Ada.' });
    // A streamed turn continues the JSON one, and is itself kept.
    const id2 = rid('t-prev-2');
    const stream = await openai.responses.create(
      { model: 'claude-only', previous_response_id: first.id, input: 'What is my name?', stream: true },
      withRequestId(id2),
    );
    let second: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) if (ev.type === 'response.completed') second = ev.response;
    const up2 = JSON.parse(upstreamOf(stack.sim, id2).body.toString()) as {
      system?: string;
      messages: { role: string; content: { type: string; text?: string }[] }[];
    };
    expect(up2.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(up2.messages[0]!.content[0]!.text).toBe('My name is Ada.');
    expect(up2.messages[1]!.content[0]!.text).toBe(first.output_text);
    // Instructions are not carried over (as at OpenAI): each request sends its own.
    expect(up2.system).toBeUndefined();

    const id3 = rid('t-prev-3');
    await openai.responses.create({ model: 'claude-only', previous_response_id: second!.id, input: 'Thanks.', store: false }, withRequestId(id3));
    const up3 = JSON.parse(upstreamOf(stack.sim, id3).body.toString()) as { messages: unknown[] };
    expect(up3.messages).toHaveLength(5);

    // Another key cannot continue it; an unknown id and one sent with store: false are not held.
    const other = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY2, maxRetries: 0 });
    const notYours = await other.responses.create({ model: 'claude-only', previous_response_id: first.id, input: 'again' }).catch((e: unknown) => e);
    expect(notYours).toMatchObject({ status: 400, param: 'previous_response_id' });
    const unknown = await openai.responses.create({ model: 'claude-only', previous_response_id: 'resp_123', input: 'again' }).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 400, param: 'previous_response_id' });
    const last = (await stack.gw.deps.store.query<{ n: number }>('SELECT count(*)::int AS n FROM translated_responses')).rows[0]!.n;
    const unkept = await openai.responses.create({ model: 'claude-only', input: 'forget me', store: false });
    expect((await stack.gw.deps.store.query<{ n: number }>('SELECT count(*)::int AS n FROM translated_responses')).rows[0]!.n).toBe(last);
    const gone = await openai.responses.create({ model: 'claude-only', previous_response_id: unkept.id, input: 'again' }).catch((e: unknown) => e);
    expect(gone).toMatchObject({ status: 400, param: 'previous_response_id' });
  });

  it('against a Chat-Completions-only model too (the third pair)', async () => {
    const id = rid('t-r-cc');
    const r = await openai.responses.create({ model: 'compat-only', input: 'Hello', max_output_tokens: 300 }, withRequestId(id));
    expect(r).toMatchObject({ status: 'completed', model: 'compat-only' });
    // A compatible server gets max_tokens (many know no other).
    expect(JSON.parse(upstreamOf(stack.sim, id).body.toString())).toMatchObject({
      model: 'gpt-sim',
      max_tokens: 300,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(r.output_text.length).toBeGreaterThan(0);
  });
});

describe('images a tool returned (a screenshot, an image file read) across pairs', () => {
  const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  const turns = (content: Anthropic.ToolResultBlockParam['content']): Anthropic.MessageParam[] => [
    { role: 'user', content: 'Take a screenshot' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'screenshot', input: {} }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content }] },
  ];
  const shot: Anthropic.ToolResultBlockParam['content'] = [
    { type: 'text', text: 'the screen' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
  ];
  const tools: Anthropic.Tool[] = [{ name: 'screenshot', input_schema: { type: 'object', properties: {} } }];

  it('a Messages tool_result image reaches a Chat Completions backend in a user message after the tool message', async () => {
    const id = rid('t-shot-chat');
    await anthropic.messages.create({ model: 'gpt-only', max_tokens: 100, tools, messages: turns(shot) }, withRequestId(id));
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as { messages: { role: string; content: unknown }[] };
    expect(up.messages.slice(-2)).toEqual([
      { role: 'tool', tool_call_id: 'toolu_1', content: 'the screen' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'The images the tool call toolu_1 returned:' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
        ],
      },
    ]);
  });

  it('and a Responses-only backend in the function_call_output, beside its text', async () => {
    const id = rid('t-shot-resp');
    await anthropic.messages.create({ model: 'responses-only', max_tokens: 100, tools, messages: turns(shot) }, withRequestId(id));
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as { input: { type?: string; output?: unknown }[] };
    expect(up.input.find((i) => i.type === 'function_call_output')!.output).toEqual([
      { type: 'input_text', text: 'the screen' },
      { type: 'input_image', image_url: `data:image/png;base64,${PNG}`, detail: 'auto' },
    ]);
  });

  it('a Responses function_call_output image reaches Anthropic inside the tool_result', async () => {
    const id = rid('t-shot-msg');
    await openai.responses.create(
      {
        model: 'claude-only',
        tools: [{ type: 'function', name: 'screenshot', parameters: { type: 'object', properties: {} }, strict: false }],
        input: [
          { role: 'user', content: 'Take a screenshot' },
          { type: 'function_call', call_id: 'call_1', name: 'screenshot', arguments: '{}' },
          {
            type: 'function_call_output',
            call_id: 'call_1',
            output: [
              { type: 'input_text', text: 'the screen' },
              { type: 'input_image', image_url: `data:image/png;base64,${PNG}`, detail: 'auto' },
            ],
          },
        ],
      },
      withRequestId(id),
    );
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as { messages: { content: { type: string; content?: unknown }[] }[] };
    const result = up.messages.flatMap((m) => m.content).find((b) => b.type === 'tool_result')!;
    expect(result.content).toEqual([
      { type: 'text', text: 'the screen' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
    ]);
  });
});

describe('count_tokens on OpenAI models', () => {
  it("counts with the family's public tokenizer (o200k_base) and says so; a model without one is estimated", async () => {
    const { countTokens } = await import('gpt-tokenizer/encoding/o200k_base');
    const system = 'You are terse.';
    const text = 'Hello, world! How many tokens is this sentence, exactly?';
    const { data, response } = await anthropic.messages.countTokens({ model: 'gpt-41', system, messages: [{ role: 'user', content: text }] }).withResponse();
    expect(response.headers.get('x-tollgate-token-count')).toBe('tokenizer o200k_base');
    // Priming, then each message's framing and its text.
    expect(data.input_tokens).toBe(3 + (3 + countTokens(system)) + (3 + countTokens(text)));
    const other = await anthropic.messages.countTokens({ model: 'gpt-only', system, messages: [{ role: 'user', content: text }] }).withResponse();
    expect(other.response.headers.get('x-tollgate-token-count')).toBe('estimated');
  });
});

describe('documents (PDF) across pairs', () => {
  const PDF = Buffer.from('%PDF-1.4 tollgate test').toString('base64');

  it('a Chat Completions file part reaches Anthropic as a document block, and an Anthropic document reaches Chat Completions as a file part', async () => {
    const id = rid('t-doc-cc');
    await openai.chat.completions.create(
      {
        model: 'claude-only',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Summarise' },
              { type: 'file', file: { filename: 'a.pdf', file_data: `data:application/pdf;base64,${PDF}` } },
            ],
          },
        ],
      },
      withRequestId(id),
    );
    const up = JSON.parse(upstreamOf(stack.sim, id).body.toString()) as { messages: { content: unknown[] }[] };
    expect(up.messages[0]!.content[1]).toEqual({ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: PDF }, title: 'a.pdf' });

    const id2 = rid('t-doc-msg');
    await anthropic.messages.create(
      {
        model: 'gpt-only',
        max_tokens: 100,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: PDF }, title: 'b.pdf' },
              { type: 'text', text: 'Summarise' },
            ],
          },
        ],
      },
      withRequestId(id2),
    );
    const up2 = JSON.parse(upstreamOf(stack.sim, id2).body.toString()) as { messages: { content: unknown[] }[] };
    expect(up2.messages[0]!.content[0]).toEqual({ type: 'file', file: { filename: 'b.pdf', file_data: `data:application/pdf;base64,${PDF}` } });
  });

  it('a document by URL cannot go to a Chat Completions backend: a 400 naming the backend, nothing charged', async () => {
    const id = rid('t-doc-url');
    const err = await anthropic.messages
      .create(
        {
          model: 'gpt-only',
          max_tokens: 100,
          messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } }] }],
        },
        withRequestId(id),
      )
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, error: { type: 'error', error: { type: 'invalid_request_error' } } });
    expect((err as Error).message).toMatch(/document given by URL.*served by openai/);
    expect(stack.sim.recorder.all().filter((r) => r.headers['x-request-id'] === id)).toHaveLength(0);
    // Refused before the hold: nothing held, nothing settled.
    expect(billing.quotes.has(id)).toBe(false);
  });
});

describe('the remaining pairs', () => {
  it('Chat Completions client on a Chat-Completions model is still passthrough (no translation headers)', async () => {
    const { response } = await openai.chat.completions.create({ model: 'gpt-only', messages: [{ role: 'user', content: 'hi' }], seed: 3 }).withResponse();
    expect(response.headers.get('x-tollgate-dropped-fields')).toBeNull();
  });
});
