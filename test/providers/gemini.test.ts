import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputTokens } from '../../simulator/gemini-generate.js';
import { priceOf, providerStack, rid, route, withId, type ProviderStack } from './support.js';

/**
 * Gemini (AI Studio) behind every client endpoint: the official openai SDK (Chat Completions and
 * Responses) and @anthropic-ai/sdk (Messages), JSON and SSE, against the simulator's
 * generateContent / streamGenerateContent?alt=sse. Usage and charges are checked against the
 * simulator's own count; thought signatures survive a tool loop on a Gemini 3 model, which
 * refuses a call without one.
 */
const GEMINI_KEY = 'AIza-sim-gemini-secret-0123456789';
let p: ProviderStack;

const WEATHER = {
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const TIME = {
  name: 'get_time',
  description: 'Local time of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

beforeAll(async () => {
  p = await providerStack(
    (sim) => [
      route('gem-flash', { provider: 'gemini', baseURL: sim, model: 'gemini-2.5-flash', credentials: { env: 'GEMINI_API_KEY' } }),
      route('gem-3', { provider: 'gemini', baseURL: `${sim}/v1beta`, model: 'models/gemini-3-pro-preview', credentials: { env: 'GEMINI_API_KEY' } }),
    ],
    { GEMINI_API_KEY: GEMINI_KEY },
  );
});
afterAll(async () => {
  await p?.close();
  // Never a log line with the provider's key.
  expect(p.logs.join('\n')).not.toContain(GEMINI_KEY);
});

const words = (s: string) => (s === '' ? 0 : s.split(' ').length);

describe('openai SDK, Chat Completions', () => {
  it('JSON: Gemini wire upstream (path, x-goog-api-key, systemInstruction, the hold cap), usage and charge exactly what Gemini reported', async () => {
    const id = rid('g-cc-json');
    const c = await p.openai.chat.completions.create(
      {
        model: 'gem-flash',
        temperature: 0.3,
        stop: ['END'],
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hello there' },
        ],
      },
      withId(id),
    );
    expect(c.model).toBe('gem-flash');
    expect(c.choices[0]!.finish_reason).toBe('stop');
    const text = c.choices[0]!.message.content!;
    expect(text.length).toBeGreaterThan(0);
    const up = p.upstream(id);
    expect(up.path).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(up.headers['x-goog-api-key']).toBe(GEMINI_KEY);
    expect(up.headers.authorization).toBeUndefined();
    expect(up.body).toEqual({
      contents: [{ role: 'user', parts: [{ text: 'Hello there' }] }],
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
      generationConfig: { maxOutputTokens: 4096, temperature: 0.3, stopSequences: ['END'] },
    });
    const rec = await p.record(id);
    expect(rec).toMatchObject({ usage_source: 'reported', status: 'ok', upstream_model: 'gemini-2.5-flash', model: 'gem-flash' });
    expect(Number(rec.input_tokens)).toBe(inputTokens(up.body));
    expect(Number(rec.output_tokens)).toBe(words(text));
    expect(c.usage).toMatchObject({ prompt_tokens: inputTokens(up.body), completion_tokens: words(text) });
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('SSE with reasoning: thoughts as reasoning_content, thoughtsTokenCount charged as output and reported as reasoning tokens', async () => {
    const id = rid('g-cc-sse');
    const stream = await p.openai.chat.completions.create(
      {
        model: 'gem-flash',
        stream: true,
        stream_options: { include_usage: true },
        reasoning_effort: 'low',
        messages: [{ role: 'user', content: 'Think then tell' }],
      },
      withId(id),
    );
    let text = '';
    let reasoning = '';
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      text += d?.content ?? '';
      reasoning += d?.reasoning_content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(finish).toBe('stop');
    expect(reasoning.length).toBeGreaterThan(0);
    const up = p.upstream(id);
    expect(up.path).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent');
    expect(up.query).toBe('alt=sse');
    expect(up.body.generationConfig).toEqual({ maxOutputTokens: 4096, thinkingConfig: { thinkingBudget: 2048, includeThoughts: true } });
    const rec = await p.record(id);
    const thoughts = words(reasoning);
    expect(Number(rec.reasoning_tokens)).toBe(thoughts);
    expect(Number(rec.output_tokens)).toBe(words(text) + thoughts);
    expect(usage).toMatchObject({
      prompt_tokens: inputTokens(up.body),
      completion_tokens: words(text) + thoughts,
      completion_tokens_details: { reasoning_tokens: thoughts },
    });
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('parallel function calls on Gemini 3 from a client that cannot carry thought signatures: the documented skip value goes back, Gemini accepts the loop', async () => {
    const tools = [
      { type: 'function' as const, function: WEATHER },
      { type: 'function' as const, function: TIME },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather and time in Paris? [sim:tool] [sim:parallel]' }];
    const first = await p.openai.chat.completions.create({ model: 'gem-3', tools, messages });
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    const calls = first.choices[0]!.message.tool_calls! as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(calls.map((c) => c.function.name)).toEqual(['get_weather', 'get_time']);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
    messages.push({ role: 'assistant', content: null, tool_calls: calls });
    messages.push({ role: 'tool', tool_call_id: calls[0]!.id, content: '{"sky":"sunny"}' });
    messages.push({ role: 'tool', tool_call_id: calls[1]!.id, content: '14:00' });
    const id = rid('g-cc-tool2');
    const next = await p.openai.chat.completions.create({ model: 'gem-3', tools, messages }, withId(id));
    expect(next.choices[0]!.finish_reason).toBe('stop');
    const up = p.upstream(id);
    expect(up.path).toBe('/v1beta/models/gemini-3-pro-preview:generateContent');
    expect(up.body.contents).toEqual([
      { role: 'user', parts: [{ text: 'Weather and time in Paris? [sim:tool] [sim:parallel]' }] },
      {
        role: 'model',
        parts: [
          { functionCall: { name: 'get_weather', args: { city: 'Weather and time in Paris?' } }, thoughtSignature: 'skip_thought_signature_validator' },
          { functionCall: { name: 'get_time', args: { city: 'Weather and time in Paris?' } } },
        ],
      },
      {
        role: 'user',
        parts: [
          { functionResponse: { name: 'get_weather', response: { sky: 'sunny' } } },
          { functionResponse: { name: 'get_time', response: { result: '14:00' } } },
        ],
      },
    ]);
  });

  it("an upstream 429 keeps its status in OpenAI's shape; a mid-stream error ends the stream with an error", async () => {
    const err = await p.openai.chat.completions.create({ model: 'gem-flash', messages: [{ role: 'user', content: '[sim:429]' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 429 });
    expect(String((err as Error).message)).toContain('Resource has been exhausted');
    const stream = await p.openai.chat.completions.create({ model: 'gem-flash', stream: true, messages: [{ role: 'user', content: 'go on [sim:fail]' }] });
    const failed = await (async () => {
      for await (const _ of stream) void _;
    })().catch((e: unknown) => e);
    expect(String((failed as Error).message)).toContain('overloaded');
  });
});

describe('@anthropic-ai/sdk, Messages', () => {
  it('a thinking tool loop on Gemini 3: the thought signature comes back as a thinking block and returns to Gemini on its call', async () => {
    const tools: Anthropic.Tool[] = [{ name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema }];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Rome? [sim:tool]' }];
    const id1 = rid('g-m-tool1');
    const first = await p.anthropic.messages
      .stream({ model: 'gem-3', max_tokens: 3000, thinking: { type: 'enabled', budget_tokens: 1024 }, tools, messages }, withId(id1))
      .finalMessage();
    expect(first.stop_reason).toBe('tool_use');
    const types = first.content.map((b) => b.type);
    expect(types).toEqual(['thinking', 'thinking', 'tool_use']);
    const sigBlock = first.content[1] as Anthropic.ThinkingBlock;
    expect(sigBlock.thinking).toBe('');
    expect(sigBlock.signature.startsWith('gemini:')).toBe(true);
    const call = first.content[2] as Anthropic.ToolUseBlock;
    messages.push({ role: 'assistant', content: first.content });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'rain, 12 C' }] });
    const id2 = rid('g-m-tool2');
    const next = await p.anthropic.messages.create(
      { model: 'gem-3', max_tokens: 3000, thinking: { type: 'enabled', budget_tokens: 1024 }, tools, messages },
      withId(id2),
    );
    expect(next.stop_reason).toBe('end_turn');
    const first1 = p.upstream(id1);
    expect(first1.body.tools).toEqual([
      { functionDeclarations: [{ name: 'get_weather', description: 'Weather of a city', parametersJsonSchema: WEATHER.parameters }] },
    ]);
    const model = (p.upstream(id2).body.contents as { role: string; parts: Record<string, unknown>[] }[])[1]!;
    expect(model.role).toBe('model');
    const fc = model.parts.find((x) => x.functionCall)!;
    expect(fc.thoughtSignature).toBe(sigBlock.signature.slice('gemini:'.length));
    // The usage as Messages reports it: input without the cached part.
    const rec = await p.record(id2);
    expect(next.usage.input_tokens + (next.usage.cache_read_input_tokens ?? 0)).toBe(Number(rec.input_tokens));
    expect(next.usage.output_tokens).toBe(Number(rec.output_tokens));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('a signed answer streams as one text block (the signature after it, as Claude Code shows the last text block), and the signature returns on the text', async () => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Say hello' }];
    const id1 = rid('g-m-text1');
    const msg = await p.anthropic.messages
      .stream({ model: 'gem-3', max_tokens: 3000, thinking: { type: 'enabled', budget_tokens: 1024 }, messages }, withId(id1))
      .finalMessage();
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text', 'thinking']);
    const text = (msg.content[1] as Anthropic.TextBlock).text;
    expect(text.split(' ').length).toBeGreaterThan(3);
    const sig = (msg.content[2] as Anthropic.ThinkingBlock).signature;
    expect(sig.startsWith('gemini:')).toBe(true);
    messages.push({ role: 'assistant', content: msg.content }, { role: 'user', content: 'And again' });
    const id2 = rid('g-m-text2');
    await p.anthropic.messages.create({ model: 'gem-3', max_tokens: 3000, thinking: { type: 'enabled', budget_tokens: 1024 }, messages }, withId(id2));
    const model = (p.upstream(id2).body.contents as { role: string; parts: Record<string, unknown>[] }[])[1]!;
    expect(model.parts.find((x) => x.text === text)!.thoughtSignature).toBe(sig.slice('gemini:'.length));
  });

  it('implicit caching: a long system prompt seen before is reported cached and charged at the cached price', async () => {
    const system = `You are a careful assistant. ${'Follow the house style. '.repeat(30)}`;
    await p.anthropic.messages.create({ model: 'gem-flash', max_tokens: 100, system, messages: [{ role: 'user', content: 'first' }] });
    const id = rid('g-m-cache');
    const msg = await p.anthropic.messages.create({ model: 'gem-flash', max_tokens: 100, system, messages: [{ role: 'user', content: 'second' }] }, withId(id));
    expect(msg.usage.cache_read_input_tokens).toBeGreaterThan(0);
    const rec = await p.record(id);
    expect(Number(rec.cached_input_tokens)).toBe(msg.usage.cache_read_input_tokens);
    expect(Number(rec.input_tokens)).toBe(inputTokens(p.upstream(id).body));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
    expect(priceOf(rec)).toBeLessThan(BigInt(rec.input_tokens as string) * 3n + BigInt(rec.output_tokens as string) * 5n);
  });

  it("count_tokens is Gemini's own countTokens (the whole request: system, tools), the same count a call then reports", async () => {
    const req = {
      model: 'gem-flash',
      system: 'You count.',
      tools: [{ name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema }],
      messages: [{ role: 'user' as const, content: 'How many tokens is this?' }],
    };
    const { data, response } = await p.anthropic.messages.countTokens(req).withResponse();
    expect(response.headers.get('x-tollgate-token-count')).toBeNull();
    const up = p.stack.sim.recorder.last();
    expect(up!.path).toBe('/v1beta/models/gemini-2.5-flash:countTokens');
    expect(up!.headers['x-goog-api-key']).toBe(GEMINI_KEY);
    const msg = await p.anthropic.messages.create({ ...req, max_tokens: 50 });
    expect(data.input_tokens).toBe(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0));
  });

  it('max_tokens reached: MAX_TOKENS maps to max_tokens', async () => {
    const msg = await p.anthropic.messages.create({ model: 'gem-flash', max_tokens: 3, messages: [{ role: 'user', content: 'long [sim:tokens=40]' }] });
    expect(msg.stop_reason).toBe('max_tokens');
    expect(msg.usage.output_tokens).toBe(3);
  });
});

describe('openai SDK, Responses', () => {
  it('JSON and SSE: output text, usage, charge', async () => {
    const id = rid('g-r-json');
    const r = await p.openai.responses.create({ model: 'gem-flash', instructions: 'Be brief.', input: 'Hi' }, withId(id));
    expect(r.output_text.length).toBeGreaterThan(0);
    const rec = await p.record(id);
    expect(r.usage).toMatchObject({ input_tokens: Number(rec.input_tokens), output_tokens: Number(rec.output_tokens) });
    const sid = rid('g-r-sse');
    const stream = await p.openai.responses.create({ model: 'gem-flash', input: 'Tell me', stream: true }, withId(sid));
    let text = '';
    let done: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') done = ev.response;
    }
    const item = done!.output.find((o) => o.type === 'message') as OpenAI.Responses.ResponseOutputMessage;
    expect((item.content[0] as OpenAI.Responses.ResponseOutputText).text).toBe(text);
    const srec = await p.record(sid);
    expect(done!.usage!.output_tokens).toBe(Number(srec.output_tokens));
    expect(Number(srec.output_tokens)).toBe(words(text));
    expect(BigInt(srec.credits as string)).toBe(priceOf(srec));
  });
});
