import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { RecordingBilling, rid, upstreamOf, withRequestId } from './support.js';

/**
 * A tool loop on every pair of client protocol and backend protocol (the six cross pairs and the
 * three passthroughs): the model makes two parallel calls whose arguments stream in pieces, the
 * client runs both tools and sends both results, the model answers. What the upstream receives
 * on the second turn must pair each result with the call it answers, in the backend's own shape.
 */
const KEY = 'sk-service-tool-loop-test';
const billing = new RecordingBilling();
let stack: Stack;
let openai: OpenAI;
let anthropic: Anthropic;

const WEATHER = {
  name: 'get_weather',
  description: 'Weather of a city',
  schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const TIME = {
  name: 'get_time',
  description: 'Local time of a city',
  schema: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] },
};
const PROMPT = 'Weather and time in Paris? [sim:tool=2]';

/** The backends: each model is served through one protocol only. */
const BACKENDS = {
  'chat-completions': 'via-chat',
  messages: 'via-messages',
  responses: 'via-responses',
} as const;
type Wire = keyof typeof BACKENDS;

beforeAll(async () => {
  stack = await startStack(
    (sim) => [
      chatRoute('via-chat', `${sim}/v1`, { backend: { provider: 'openai-compatible', model: 'gpt-sim' } }),
      chatRoute('via-messages', sim, { backend: { provider: 'anthropic', model: 'claude-sim' } }),
      chatRoute('via-responses', `${sim}/v1`, { backend: { provider: 'openai-compatible', model: 'gpt-sim', paths: { responses: '/responses' } } }),
      group('g', Object.values(BACKENDS)),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
  openai = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: stack.gw.url, apiKey: null, authToken: KEY, maxRetries: 0 });
});
afterAll(() => stack.close());

interface Call {
  id: string;
  name: string;
  args: string;
  /** How many stream events carried pieces of the arguments. */
  pieces: number;
}

/** One client protocol: a streamed first turn that ends in calls, then the results and a final answer. */
interface ClientLoop {
  first(model: string, prompt?: string): Promise<{ calls: Call[]; finish: string }>;
  second(model: string, calls: Call[], id: string): Promise<{ text: string; finish: string }>;
}

const chatClient: ClientLoop = {
  async first(model, prompt = PROMPT) {
    const tools = [WEATHER, TIME].map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.schema } }));
    const stream = await openai.chat.completions.create({ model, stream: true, tools, messages: [{ role: 'user', content: prompt }] });
    const calls = new Map<number, Call>();
    let finish = '';
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        const c = calls.get(tc.index) ?? { id: '', name: '', args: '', pieces: 0 };
        c.id ||= tc.id ?? '';
        c.name ||= tc.function?.name ?? '';
        if (tc.function?.arguments) {
          c.args += tc.function.arguments;
          c.pieces++;
        }
        calls.set(tc.index, c);
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    return { calls: [...calls.values()], finish };
  },
  async second(model, calls, id) {
    const tools = [WEATHER, TIME].map((t) => ({ type: 'function' as const, function: { name: t.name, parameters: t.schema } }));
    const r = await openai.chat.completions.create(
      {
        model,
        tools,
        messages: [
          { role: 'user', content: PROMPT },
          {
            role: 'assistant',
            content: null,
            tool_calls: calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.args } })),
          },
          ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: `${c.name}: fine` })),
        ],
      },
      withRequestId(id),
    );
    return { text: r.choices[0]!.message.content ?? '', finish: r.choices[0]!.finish_reason };
  },
};

const messagesClient: ClientLoop = {
  async first(model, prompt = PROMPT) {
    const tools = [WEATHER, TIME].map((t) => ({ name: t.name, description: t.description, input_schema: t.schema as Anthropic.Tool.InputSchema }));
    const stream = anthropic.messages.stream({ model, max_tokens: 1024, tools, messages: [{ role: 'user', content: prompt }] });
    const pieces = new Map<number, number>();
    for await (const ev of stream)
      if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') pieces.set(ev.index, (pieces.get(ev.index) ?? 0) + 1);
    const msg = await stream.finalMessage();
    const calls = msg.content.flatMap((b, i) =>
      b.type === 'tool_use' ? [{ id: b.id, name: b.name, args: JSON.stringify(b.input), pieces: pieces.get(i) ?? 0 }] : [],
    );
    return { calls, finish: msg.stop_reason ?? '' };
  },
  async second(model, calls, id) {
    const tools = [WEATHER, TIME].map((t) => ({ name: t.name, input_schema: t.schema as Anthropic.Tool.InputSchema }));
    const r = await anthropic.messages.create(
      {
        model,
        max_tokens: 1024,
        tools,
        messages: [
          { role: 'user', content: PROMPT },
          { role: 'assistant', content: calls.map((c) => ({ type: 'tool_use' as const, id: c.id, name: c.name, input: JSON.parse(c.args) as unknown })) },
          { role: 'user', content: calls.map((c) => ({ type: 'tool_result' as const, tool_use_id: c.id, content: `${c.name}: fine` })) },
        ],
      },
      withRequestId(id),
    );
    return { text: r.content.map((b) => (b.type === 'text' ? b.text : '')).join(''), finish: r.stop_reason ?? '' };
  },
};

const responsesClient: ClientLoop = {
  async first(model, prompt = PROMPT) {
    const tools = [WEATHER, TIME].map((t) => ({ type: 'function' as const, name: t.name, description: t.description, parameters: t.schema, strict: false }));
    const stream = await openai.responses.create({ model, stream: true, tools, input: prompt });
    const pieces = new Map<number, number>();
    let calls: Call[] = [];
    let status = '';
    for await (const ev of stream) {
      if (ev.type === 'response.function_call_arguments.delta') pieces.set(ev.output_index, (pieces.get(ev.output_index) ?? 0) + 1);
      if (ev.type === 'response.completed') {
        status = ev.response.status ?? '';
        calls = ev.response.output.flatMap((o, i) =>
          o.type === 'function_call' ? [{ id: o.call_id, name: o.name, args: o.arguments, pieces: pieces.get(i) ?? 0 }] : [],
        );
      }
    }
    return { calls, finish: status };
  },
  async second(model, calls, id) {
    const tools = [WEATHER, TIME].map((t) => ({ type: 'function' as const, name: t.name, parameters: t.schema, strict: false }));
    const r = await openai.responses.create(
      {
        model,
        tools,
        input: [
          { role: 'user', content: PROMPT },
          ...calls.map((c) => ({ type: 'function_call' as const, call_id: c.id, name: c.name, arguments: c.args })),
          ...calls.map((c) => ({ type: 'function_call_output' as const, call_id: c.id, output: `${c.name}: fine` })),
        ],
      },
      withRequestId(id),
    );
    return { text: r.output_text, finish: r.status ?? '' };
  },
};

const CLIENTS: Record<Wire, { loop: ClientLoop; callFinish: string; textFinish: string }> = {
  'chat-completions': { loop: chatClient, callFinish: 'tool_calls', textFinish: 'stop' },
  messages: { loop: messagesClient, callFinish: 'tool_use', textFinish: 'end_turn' },
  responses: { loop: responsesClient, callFinish: 'completed', textFinish: 'completed' },
};

/** The call ids of the assistant turn and the ids the results answer, as the upstream received them. */
function pairing(wire: Wire, body: Record<string, unknown>): { calls: string[]; results: string[] } {
  type Block = { type?: string; id?: string; tool_use_id?: string; call_id?: string };
  if (wire === 'chat-completions') {
    const messages = body.messages as { role: string; tool_calls?: { id: string }[]; tool_call_id?: string }[];
    return {
      calls: messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)),
      results: messages.flatMap((m) => (m.role === 'tool' ? [m.tool_call_id!] : [])),
    };
  }
  if (wire === 'messages') {
    const blocks = (body.messages as { content: Block[] | string }[]).flatMap((m) => (typeof m.content === 'string' ? [] : m.content));
    return {
      calls: blocks.flatMap((b) => (b.type === 'tool_use' ? [b.id!] : [])),
      results: blocks.flatMap((b) => (b.type === 'tool_result' ? [b.tool_use_id!] : [])),
    };
  }
  const items = body.input as Block[];
  return {
    calls: items.flatMap((b) => (b.type === 'function_call' ? [b.call_id!] : [])),
    results: items.flatMap((b) => (b.type === 'function_call_output' ? [b.call_id!] : [])),
  };
}

describe.each(Object.keys(CLIENTS) as Wire[])('%s client', (client) => {
  it.each(Object.keys(BACKENDS) as Wire[])('against a %s backend: two parallel calls streamed in pieces, both results, the answer', async (backend) => {
    const model = BACKENDS[backend];
    const { loop, callFinish, textFinish } = CLIENTS[client];
    const first = await loop.first(model);
    expect(first.finish).toBe(callFinish);
    expect(first.calls.map((c) => c.name)).toEqual(['get_weather', 'get_time']);
    for (const c of first.calls) {
      expect(c.id).not.toBe('');
      expect(Object.keys(JSON.parse(c.args) as object)).toEqual([c.name === 'get_weather' ? 'city' : 'zone']);
      // The arguments arrived in several events, as the upstream streamed them.
      expect(c.pieces).toBeGreaterThan(1);
    }
    expect(new Set(first.calls.map((c) => c.id)).size).toBe(2);

    const id = rid(`loop-${client}-${backend}`);
    const second = await loop.second(model, first.calls, id);
    expect(second.finish).toBe(textFinish);
    expect(second.text.length).toBeGreaterThan(0);
    // Each result reached the upstream answering the call it came from, in the backend's shape.
    const up = pairing(backend, JSON.parse(upstreamOf(stack.sim, id).body.toString()) as Record<string, unknown>);
    expect(up.calls).toEqual(first.calls.map((c) => c.id));
    expect(up.results).toEqual(up.calls);
    const settled = await billing.waitSettled(id);
    expect(settled).toMatchObject({ status: 'ok', usageSource: 'reported' });
    expect(settled.usage?.outputTokens).toBeGreaterThan(0);
  });
});

describe.each(Object.keys(CLIENTS) as Wire[])('%s client', (client) => {
  it('against a Chat Completions backend that interleaves parallel calls: each call whole, with its own arguments', async () => {
    const { calls, finish } = await CLIENTS[client].loop.first(BACKENDS['chat-completions'], `${PROMPT} [sim:interleave]`);
    expect(finish).toBe(CLIENTS[client].callFinish);
    expect(calls.map((c) => [c.name, Object.keys(JSON.parse(c.args) as object)])).toEqual([
      ['get_weather', ['city']],
      ['get_time', ['zone']],
    ]);
  });
});
