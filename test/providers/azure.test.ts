import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceOf, providerStack, rid, route, withId, type ProviderStack } from './support.js';

/**
 * Azure OpenAI: Chat Completions and Responses clients are passed through to deployment paths
 * (api-version, api-key), Messages clients are translated; the v1 API's paths; an Entra token
 * goes as Bearer. Usage and charges as the upstream reported.
 */
const AZURE_KEY = 'azure-sim-key-9f8e7d6c5b4a';
const ENTRA = 'eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJjb2duaXRpdmUifQ.c2lnbmF0dXJl';
let p: ProviderStack;

beforeAll(async () => {
  p = await providerStack(
    (sim) => [
      route('az-gpt', { provider: 'azure-openai', baseURL: sim, model: 'gpt4o-deploy', credentials: { env: 'AZURE_OPENAI_API_KEY' } }),
      route('az-preview', {
        provider: 'azure-openai',
        baseURL: `${sim}/openai`,
        model: 'o4-deploy',
        apiVersion: '2025-03-01-preview',
        credentials: { env: 'AZURE_OPENAI_API_KEY' },
      }),
      route('az-v1', { provider: 'azure-openai', baseURL: `${sim}/openai/v1`, model: 'gpt5-deploy', credentials: { env: 'AZURE_ENTRA_TOKEN' } }),
    ],
    { AZURE_OPENAI_API_KEY: AZURE_KEY, AZURE_ENTRA_TOKEN: ENTRA },
  );
});
afterAll(async () => {
  await p?.close();
  expect(p.logs.join('\n')).not.toContain(AZURE_KEY);
});

describe('passthrough', () => {
  it('Chat Completions JSON: the deployment path with the default api-version, api-key, the body with only model and the cap set', async () => {
    const id = rid('az-cc');
    const c = await p.openai.chat.completions.create({ model: 'az-gpt', messages: [{ role: 'user', content: 'Hello Azure' }], seed: 3 }, withId(id));
    expect(c.choices[0]!.message.content!.length).toBeGreaterThan(0);
    const up = p.upstream(id);
    expect(up.path).toBe('/openai/deployments/gpt4o-deploy/chat/completions');
    expect(up.query).toBe('api-version=2024-10-21');
    expect(up.headers['api-key']).toBe(AZURE_KEY);
    expect(up.headers.authorization).toBeUndefined();
    // Passed through: the client's own fields kept, the cap the hold was sized for as Azure's reasoning models take it.
    expect(up.body).toMatchObject({ model: 'gpt4o-deploy', seed: 3, max_completion_tokens: 4096 });
    const rec = await p.record(id);
    expect(rec).toMatchObject({ usage_source: 'reported', status: 'ok', upstream_model: 'gpt4o-deploy' });
    expect(c.usage).toMatchObject({ prompt_tokens: Number(rec.input_tokens), completion_tokens: Number(rec.output_tokens) });
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it("Chat Completions SSE: Azure's content-filter chunk (no choices) passes, usage is read from the stream", async () => {
    const id = rid('az-cc-sse');
    const stream = await p.openai.chat.completions.create(
      { model: 'az-gpt', stream: true, messages: [{ role: 'user', content: 'Stream please' }] },
      withId(id),
    );
    let text = '';
    let filterChunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices.length === 0 && 'prompt_filter_results' in chunk) filterChunks++;
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(filterChunks).toBe(1);
    expect(text.length).toBeGreaterThan(0);
    const rec = await p.record(id);
    expect(rec).toMatchObject({ usage_source: 'reported', status: 'ok' });
    expect(Number(rec.output_tokens)).toBe(text.split(' ').length);
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it('Responses: /openai/responses with the route apiVersion; the v1 API with an Entra token as Bearer', async () => {
    const id = rid('az-r');
    const r = await p.openai.responses.create({ model: 'az-preview', input: 'Hi' }, withId(id));
    expect(r.output_text.length).toBeGreaterThan(0);
    const up = p.upstream(id);
    expect(up.path).toBe('/openai/responses');
    expect(up.query).toBe('api-version=2025-03-01-preview');
    expect(up.body.model).toBe('o4-deploy');
    const rec = await p.record(id);
    expect(r.usage).toMatchObject({ input_tokens: Number(rec.input_tokens), output_tokens: Number(rec.output_tokens) });

    const id2 = rid('az-v1');
    await p.openai.responses.create({ model: 'az-v1', input: 'Hi' }, withId(id2));
    const up2 = p.upstream(id2);
    expect(up2.path).toBe('/openai/v1/responses');
    expect(up2.query).toBe('');
    expect(up2.headers.authorization).toBe(`Bearer ${ENTRA}`);
    expect(up2.headers['api-key']).toBeUndefined();
  });

  it('an upstream error passes through unchanged: a 429 with retry-after and retry-after-ms', async () => {
    const err = await p.openai.chat.completions.create({ model: 'az-gpt', messages: [{ role: 'user', content: '[sim:429]' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 429 });
    const headers = (err as { headers: Headers }).headers;
    expect([headers.get('retry-after'), headers.get('retry-after-ms')]).toEqual(['7', '7000']);
  });
});

describe('translated (@anthropic-ai/sdk)', () => {
  it('Messages to an Azure deployment: Chat Completions at the deployment path, max_completion_tokens, usage in the Messages shape', async () => {
    const id = rid('az-m');
    const stream = p.anthropic.messages.stream(
      { model: 'az-gpt', max_tokens: 256, system: 'Be brief.', messages: [{ role: 'user', content: 'Hello' }] },
      withId(id),
    );
    const msg = await stream.finalMessage();
    expect(msg.stop_reason).toBe('end_turn');
    const up = p.upstream(id);
    expect(up.path).toBe('/openai/deployments/gpt4o-deploy/chat/completions');
    expect(up.body).toMatchObject({ max_completion_tokens: 256, stream: true, stream_options: { include_usage: true } });
    const rec = await p.record(id);
    expect(msg.usage.input_tokens).toBe(Number(rec.input_tokens));
    expect(msg.usage.output_tokens).toBe(Number(rec.output_tokens));
    expect(BigInt(rec.credits as string)).toBe(priceOf(rec));
  });

  it("Azure's 429 in the Messages shape keeps how long to wait, to the millisecond too (both SDKs read retry-after-ms first)", async () => {
    const err = await p.anthropic.messages
      .create({ model: 'az-gpt', max_tokens: 64, messages: [{ role: 'user', content: '[sim:429]' }] })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 429, error: { type: 'error', error: { type: 'rate_limit_error' } } });
    const headers = (err as { headers: Headers }).headers;
    expect([headers.get('retry-after'), headers.get('retry-after-ms')]).toEqual(['7', '7000']);
  });
});
