import type Anthropic from '@anthropic-ai/sdk';
import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIM_AWS_KEYS, SIM_BEDROCK_API_KEY } from '../../simulator/bedrock-converse.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { countInputTokens } from '../../simulator/text.js';
import { priceOf, providerStack, rid, route, withId, type ProviderStack } from './support.js';

/**
 * Bedrock Converse / ConverseStream behind every client endpoint: SigV4-signed by the official
 * signer (the simulator signs again and refuses a wrong one), the binary event stream read by
 * the official codec, Claude's reasoning with its signature through a tool loop, usage and
 * charges exact. The official AWS SDK against the simulator shows that the simulator checks
 * signatures and frames streams as AWS does.
 */
const MODEL = 'anthropic.claude-sonnet-4-20250514-v1:0';
const KEYS = `${SIM_AWS_KEYS.accessKeyId}:${SIM_AWS_KEYS.secretAccessKey}`;
const WRONG = `${SIM_AWS_KEYS.accessKeyId}:not-the-secret-0000000000000000`;
let p: ProviderStack;

beforeAll(async () => {
  p = await providerStack(
    (sim) => [
      route('br-claude', { provider: 'bedrock', baseURL: sim, region: 'us-west-2', model: MODEL, credentials: { env: 'AWS_BEDROCK_KEYS' } }),
      route('br-json', { provider: 'bedrock', baseURL: sim, model: 'meta.llama3-70b-instruct-v1:0', credentials: { env: 'AWS_BEDROCK_JSON' } }),
      route('br-apikey', { provider: 'bedrock', baseURL: sim, model: 'amazon.nova-pro-v1:0', credentials: { env: 'AWS_BEARER_TOKEN_BEDROCK' } }),
      route('br-wrong', { provider: 'bedrock', baseURL: sim, model: MODEL, credentials: { env: 'AWS_WRONG' } }),
    ],
    {
      AWS_BEDROCK_KEYS: KEYS,
      AWS_BEDROCK_JSON: JSON.stringify(SIM_AWS_KEYS),
      AWS_BEARER_TOKEN_BEDROCK: SIM_BEDROCK_API_KEY,
      AWS_WRONG: WRONG,
    },
  );
});
afterAll(async () => {
  await p?.close();
  const logs = p.logs.join('\n');
  for (const secret of [SIM_AWS_KEYS.secretAccessKey, SIM_BEDROCK_API_KEY, 'not-the-secret']) expect(logs).not.toContain(secret);
});

const words = (s: string) => (s === '' ? 0 : s.split(' ').length);
const converseInput = (body: Record<string, unknown>) => countInputTokens(JSON.stringify([body.system ?? null, body.messages, body.toolConfig ?? null]));

describe('openai SDK, Chat Completions', () => {
  it('JSON: a SigV4-signed Converse call for the region, Bedrock body, usage and charge exact', async () => {
    const id = rid('br-cc');
    const c = await p.openai.chat.completions.create(
      {
        model: 'br-claude',
        temperature: 0.5,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hello Bedrock' },
        ],
      },
      withId(id),
    );
    expect(c.choices[0]!.finish_reason).toBe('stop');
    const text = c.choices[0]!.message.content!;
    const up = p.upstream(id);
    expect(up.path).toBe(`/model/${encodeURIComponent(MODEL)}/converse`);
    expect(String(up.headers.authorization)).toMatch(
      new RegExp(
        `^AWS4-HMAC-SHA256 Credential=${SIM_AWS_KEYS.accessKeyId}/\\d{8}/us-west-2/bedrock/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$`,
      ),
    );
    expect(up.headers['x-amz-date']).toBeDefined();
    expect(up.body).toEqual({
      messages: [{ role: 'user', content: [{ text: 'Hello Bedrock' }] }],
      system: [{ text: 'Be brief.' }],
      inferenceConfig: { maxTokens: 4096, temperature: 0.5 },
    });
    const rec = await p.record(id);
    expect(rec).toMatchObject({ usage_source: 'reported', status: 'ok', upstream_model: MODEL });
    expect(Number(rec.input_tokens)).toBe(converseInput(up.body));
    expect(Number(rec.output_tokens)).toBe(words(text));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('credentials as JSON sign the same way; a Bedrock API key goes as Bearer, unsigned', async () => {
    const id = rid('br-json');
    await p.openai.chat.completions.create({ model: 'br-json', messages: [{ role: 'user', content: 'hi' }] }, withId(id));
    expect(String(p.upstream(id).headers.authorization)).toMatch(/\/us-east-1\/bedrock\/aws4_request/);
    const id2 = rid('br-key');
    await p.openai.chat.completions.create({ model: 'br-apikey', messages: [{ role: 'user', content: 'hi' }] }, withId(id2));
    const up = p.upstream(id2);
    expect(up.headers.authorization).toBe(`Bearer ${SIM_BEDROCK_API_KEY}`);
    expect(up.headers['x-amz-date']).toBeUndefined();
  });

  it("a wrong secret: Bedrock's 403 reaches the client in its shape, the secret in no answer or log", async () => {
    const err = await p.openai.chat.completions.create({ model: 'br-wrong', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 403 });
    expect(String((err as Error).message)).toContain('signature we calculated does not match');
    expect(JSON.stringify(err)).not.toContain('not-the-secret');
  });

  it('SSE: the event stream decoded to chunks, usage from its metadata event; an in-stream exception ends it with an error', async () => {
    const id = rid('br-cc-sse');
    const stream = await p.openai.chat.completions.create(
      { model: 'br-claude', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Stream it' }] },
      withId(id),
    );
    let text = '';
    let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    const up = p.upstream(id);
    expect(up.path).toBe(`/model/${encodeURIComponent(MODEL)}/converse-stream`);
    expect(up.headers.accept).toBe('application/vnd.amazon.eventstream');
    const rec = await p.record(id);
    expect(usage).toEqual(expect.objectContaining({ prompt_tokens: converseInput(up.body), completion_tokens: words(text) }));
    expect(Number(rec.output_tokens)).toBe(words(text));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));

    const failing = await p.openai.chat.completions.create({ model: 'br-claude', stream: true, messages: [{ role: 'user', content: 'go [sim:fail]' }] });
    const failed = await (async () => {
      for await (const _ of failing) void _;
    })().catch((e: unknown) => e);
    expect(String((failed as Error).message)).toContain('unexpected error');
  });
});

describe('@anthropic-ai/sdk, Messages', () => {
  it("a thinking tool loop: reasoning with Bedrock's signature comes back as a thinking block and returns as reasoningContent", async () => {
    const tools: Anthropic.Tool[] = [
      { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    ];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Oslo? [sim:tool]' }];
    const first = await p.anthropic.messages
      .stream({ model: 'br-claude', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2000 }, tools, messages })
      .finalMessage();
    expect(first.stop_reason).toBe('tool_use');
    expect(first.content.map((b) => b.type)).toEqual(['thinking', 'tool_use']);
    const thinking = first.content[0] as Anthropic.ThinkingBlock;
    expect(thinking.signature.length).toBeGreaterThan(0);
    const call = first.content[1] as Anthropic.ToolUseBlock;
    expect(call.input).toEqual({ city: 'Weather in Oslo?' });
    messages.push({ role: 'assistant', content: first.content });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'snow' }] });
    const id = rid('br-m-tool2');
    const next = await p.anthropic.messages.create(
      { model: 'br-claude', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2000 }, tools, messages },
      withId(id),
    );
    expect(next.stop_reason).toBe('end_turn');
    const up = p.upstream(id).body as {
      messages: { role: string; content: Record<string, unknown>[] }[];
      additionalModelRequestFields: unknown;
      toolConfig: unknown;
    };
    expect(up.additionalModelRequestFields).toEqual({ thinking: { type: 'enabled', budget_tokens: 2000 } });
    expect(up.toolConfig).toEqual({ tools: [{ toolSpec: { name: 'get_weather', description: 'Weather', inputSchema: { json: tools[0]!.input_schema } } }] });
    expect(up.messages[1]!.content).toEqual([
      { reasoningContent: { reasoningText: { text: thinking.thinking, signature: thinking.signature } } },
      { toolUse: { toolUseId: call.id, name: 'get_weather', input: { city: 'Weather in Oslo?' } } },
    ]);
    expect(up.messages[2]!.content).toEqual([{ toolResult: { toolUseId: call.id, content: [{ text: 'snow' }] } }]);
    const rec = await p.record(id);
    expect(next.usage.input_tokens).toBe(Number(rec.input_tokens));
    expect(next.usage.output_tokens).toBe(Number(rec.output_tokens));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it("an image by URL is refused with a 400 naming it (Bedrock takes bytes); a 429 keeps its status in Anthropic's shape", async () => {
    const err = await p.anthropic.messages
      .create({
        model: 'br-claude',
        max_tokens: 100,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }],
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, error: { error: { message: expect.stringContaining('Bedrock takes images as bytes') } } });
    const limited = await p.anthropic.messages
      .create({ model: 'br-claude', max_tokens: 100, messages: [{ role: 'user', content: '[sim:429]' }] })
      .catch((e: unknown) => e);
    expect(limited).toMatchObject({ status: 429, error: { type: 'error', error: { type: 'rate_limit_error' } } });
  });
});

describe('openai SDK, Responses', () => {
  it('SSE: text deltas and usage', async () => {
    const id = rid('br-r');
    const stream = await p.openai.responses.create({ model: 'br-apikey', input: 'Tell me', stream: true }, withId(id));
    let text = '';
    let usage: { input_tokens: number; output_tokens: number } | undefined;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') usage = ev.response.usage;
    }
    const rec = await p.record(id);
    expect(usage).toMatchObject({ input_tokens: Number(rec.input_tokens), output_tokens: words(text) });
  });
});

describe('the simulator against the official AWS SDK', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator();
  });
  afterAll(() => sim.close());
  const client = (secretAccessKey: string) =>
    new BedrockRuntimeClient({
      region: 'eu-central-1',
      endpoint: sim.url,
      credentials: { accessKeyId: SIM_AWS_KEYS.accessKeyId, secretAccessKey },
      maxAttempts: 1,
      // The simulator speaks HTTP/1.1; the SDK's default handler for Bedrock is HTTP/2.
      requestHandler: new NodeHttpHandler(),
    });

  it("accepts the SDK's SigV4 and answers Converse and ConverseStream in frames the SDK reads", async () => {
    const c = client(SIM_AWS_KEYS.secretAccessKey);
    const out = await c.send(
      new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hello' }] }], inferenceConfig: { maxTokens: 50 } }),
    );
    expect(out.stopReason).toBe('end_turn');
    expect(out.output?.message?.content?.[0]?.text?.length).toBeGreaterThan(0);
    const s = await c.send(new ConverseStreamCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hello' }] }] }));
    const kinds: string[] = [];
    let outputTokens = 0;
    for await (const ev of s.stream!) {
      kinds.push(Object.keys(ev).filter((k) => (ev as unknown as Record<string, unknown>)[k] !== undefined)[0]!);
      if (ev.metadata) outputTokens = ev.metadata.usage!.outputTokens!;
    }
    expect(kinds[0]).toBe('messageStart');
    expect(kinds.slice(-2)).toEqual(['messageStop', 'metadata']);
    expect(outputTokens).toBeGreaterThan(0);
    c.destroy();
  });

  it('refuses a signature made with the wrong secret', async () => {
    const c = client('wrong-secret');
    const err = await c.send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'x' }] }] })).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'InvalidSignatureException', $metadata: { httpStatusCode: 403 } });
    c.destroy();
  });
});
