import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputTokens } from '../../simulator/gemini-generate.js';
import { countInputTokens } from '../../simulator/text.js';
import { simServiceAccount, tokenExchanges } from '../../simulator/gemini-vertex.js';
import { priceOf, providerStack, rid, route, withId, type ProviderStack } from './support.js';

/**
 * Vertex AI: Gemini (publishers/google) and Claude (publishers/anthropic rawPredict /
 * streamRawPredict) behind every client endpoint, authenticated with a service account key
 * through google-auth-library (signed JWT -> access token at the key's token_uri, cached).
 */
let p: ProviderStack;
const CLAUDE = 'claude-sonnet-4@20250514';

beforeAll(async () => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  p = await providerStack(
    (sim) => [
      route('vx-gemini', { provider: 'vertex', baseURL: sim, region: 'us-central1', model: 'gemini-2.5-pro', credentials: { env: 'VERTEX_SA' } }),
      route('vx-claude', { provider: 'vertex', baseURL: sim, region: 'us-east5', model: CLAUDE, credentials: { env: 'VERTEX_SA' } }),
      route('vx-named', {
        provider: 'vertex',
        baseURL: `${sim}/v1/projects/other-project/locations/europe-west4`,
        model: 'gemini-2.5-flash',
        credentials: { env: 'VERTEX_SA' },
      }),
      route('vx-badkey', { provider: 'vertex', baseURL: sim, region: 'us-central1', model: 'gemini-2.5-pro', credentials: { env: 'VERTEX_BAD_SA' } }),
    ],
    (sim) => ({
      VERTEX_SA: JSON.stringify(simServiceAccount(sim)),
      VERTEX_BAD_SA: JSON.stringify({ ...simServiceAccount(sim), private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }) }),
    }),
  );
});
afterAll(async () => {
  await p?.close();
  const logs = p.logs.join('\n');
  expect(logs).not.toContain('PRIVATE KEY');
  expect(logs).not.toContain('ya29.');
});

const words = (s: string) => (s === '' ? 0 : s.split(' ').length);

describe('Gemini on Vertex', () => {
  it("openai SDK JSON: Vertex's regional path with the key's project, a Bearer access token from the key; usage and charge exact; the token is reused", async () => {
    const before = tokenExchanges.get(p.stack.sim.context) ?? 0;
    const id = rid('vx-g');
    const c = await p.openai.chat.completions.create({ model: 'vx-gemini', messages: [{ role: 'user', content: 'Hello Vertex' }] }, withId(id));
    const text = c.choices[0]!.message.content!;
    const up = p.upstream(id);
    expect(up.path).toBe('/v1/projects/sim-project/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent');
    expect(String(up.headers.authorization)).toMatch(/^Bearer ya29\.sim-/);
    expect(up.headers['x-goog-api-key']).toBeUndefined();
    const rec = await p.record(id);
    expect(Number(rec.input_tokens)).toBe(inputTokens(up.body));
    expect(Number(rec.output_tokens)).toBe(words(text));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));

    const id2 = rid('vx-g2');
    await p.openai.chat.completions.create({ model: 'vx-gemini', messages: [{ role: 'user', content: 'Again' }] }, withId(id2));
    expect(p.upstream(id2).headers.authorization).toBe(up.headers.authorization);
    expect((tokenExchanges.get(p.stack.sim.context) ?? 0) - before).toBe(1);
  });

  it('@anthropic-ai/sdk stream: streamGenerateContent?alt=sse at a baseURL that names its project and location', async () => {
    const id = rid('vx-g-m');
    const msg = await p.anthropic.messages
      .stream({ model: 'vx-named', max_tokens: 200, messages: [{ role: 'user', content: 'Stream it' }] }, withId(id))
      .finalMessage();
    expect(msg.stop_reason).toBe('end_turn');
    const up = p.upstream(id);
    expect(up.path).toBe('/v1/projects/other-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash:streamGenerateContent');
    expect(up.query).toBe('alt=sse');
    const rec = await p.record(id);
    expect(msg.usage.output_tokens).toBe(Number(rec.output_tokens));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it("count_tokens: Gemini on Vertex counts at :countTokens, Claude on Vertex at count-tokens:rawPredict, each with its token; the counts are the upstream's", async () => {
    const g = await p.anthropic.messages.countTokens({ model: 'vx-gemini', messages: [{ role: 'user', content: 'count me' }] }).withResponse();
    expect(g.response.headers.get('x-tollgate-token-count')).toBeNull();
    expect(p.stack.sim.recorder.last()!.path).toBe('/v1/projects/sim-project/locations/us-central1/publishers/google/models/gemini-2.5-pro:countTokens');
    expect(g.data.input_tokens).toBeGreaterThan(0);

    const system = 'You count.';
    const tools = [{ name: 'lookup', description: 'Looks a word up', input_schema: { type: 'object' as const, properties: { word: { type: 'string' } } } }];
    const c = await p.anthropic.messages
      .countTokens({ model: 'vx-claude', system, tools, messages: [{ role: 'user', content: 'count me, and the tool too' }] })
      .withResponse();
    expect(c.response.headers.get('x-tollgate-token-count')).toBeNull();
    const up = p.stack.sim.recorder.last()!;
    expect(up.path).toBe('/v1/projects/sim-project/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict');
    expect(up.headers.authorization).toMatch(/^Bearer ya29\.sim-/);
    const body = JSON.parse(up.body.toString()) as Record<string, unknown>;
    expect(body).toMatchObject({ anthropic_version: 'vertex-2023-10-16', model: CLAUDE, system, tools: [{ name: 'lookup' }] });
    expect(body).not.toHaveProperty('max_tokens');
    // The simulator counts system, messages and tools as Anthropic's count_tokens does; the gateway answers its figure.
    expect(c.data.input_tokens).toBe(countInputTokens(JSON.stringify([body.system ?? null, body.messages, body.tools ?? null])));
  });

  it('a key Google refuses: the call fails as unavailable (502), no key or token in the answer or the logs', async () => {
    const err = await p.openai.chat.completions.create({ model: 'vx-badkey', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 502 });
    expect(JSON.stringify(err)).not.toContain('PRIVATE KEY');
    expect(p.logs.some((l) => l.includes('upstream auth failed') && l.includes('Google token exchange failed'))).toBe(true);
  });
});

describe('Claude on Vertex', () => {
  it('openai SDK SSE: streamRawPredict with the model in the path, anthropic_version in the body, usage exact', async () => {
    const id = rid('vx-c-cc');
    const stream = await p.openai.chat.completions.create(
      { model: 'vx-claude', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Hello Claude' }] },
      withId(id),
    );
    let text = '';
    let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    const up = p.upstream(id);
    expect(up.path).toBe(`/v1/projects/sim-project/locations/us-east5/publishers/anthropic/models/${encodeURIComponent(CLAUDE)}:streamRawPredict`);
    expect(up.body).toMatchObject({
      anthropic_version: 'vertex-2023-10-16',
      max_tokens: 4096,
      stream: true,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello Claude' }] }],
    });
    expect(up.body.model).toBeUndefined();
    const rec = await p.record(id);
    expect(usage).toMatchObject({ prompt_tokens: Number(rec.input_tokens), completion_tokens: words(text) });
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('@anthropic-ai/sdk JSON with thinking: rawPredict, the thinking block and its signature come back', async () => {
    const id = rid('vx-c-m');
    const msg = await p.anthropic.messages.create(
      { model: 'vx-claude', max_tokens: 3000, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Think' }] },
      withId(id),
    );
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect(p.upstream(id).path).toMatch(/:rawPredict$/);
    const rec = await p.record(id);
    expect(msg.usage.output_tokens).toBe(Number(rec.output_tokens));
  });

  it('openai SDK Responses', async () => {
    const id = rid('vx-c-r');
    const r = await p.openai.responses.create({ model: 'vx-claude', input: 'Hi' }, withId(id));
    expect(r.output_text.length).toBeGreaterThan(0);
    const rec = await p.record(id);
    expect(r.usage).toMatchObject({ input_tokens: Number(rec.input_tokens), output_tokens: Number(rec.output_tokens) });
  });
});
