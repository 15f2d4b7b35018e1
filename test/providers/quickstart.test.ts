import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSettings } from '../../kernel/settings.js';
import { loadManifests } from '../../proxy/config/folder-source.js';
import { quickstartCredentials } from '../../simulator/quickstart-credentials.js';
import { tokenExchanges } from '../../simulator/gemini-vertex.js';
import { startStack, type Stack } from '../support/stack.js';

/**
 * The quickstart's provider models as shipped (the simulator's fixed address replaced by this
 * test's), with the credentials `serve --quickstart` gives their SIM_* names: each is in the
 * default group and answers through all three client endpoints; no route sends a header of its own.
 */
const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/', import.meta.url));
const KEY = 'sk-service-quickstart';
const MODELS = ['sim-gemini', 'sim-vertex-gemini', 'sim-vertex-claude', 'sim-bedrock', 'sim-azure', 'sim-deepseek'];
let stack: Stack;

beforeAll(async () => {
  const { resources, errors } = await loadManifests(QUICKSTART);
  expect(errors).toEqual([]);
  const settings = readSettings({});
  stack = await startStack(
    (sim) => {
      const credentials = quickstartCredentials(sim);
      Object.assign(settings, { secretFromEnv: (name: string) => credentials[name] });
      return resources.map((r) => JSON.parse(JSON.stringify(r.object).replaceAll('http://127.0.0.1:8090', sim)) as object);
    },
    { settings },
  );
});
afterAll(() => stack?.close());

describe('quickstart provider models', () => {
  it.each(MODELS)('%s answers Chat Completions, Messages and Responses, usage reported', async (model) => {
    const openai = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const anthropic = new Anthropic({ baseURL: stack.gw.url, apiKey: null, authToken: KEY, maxRetries: 0 });
    const c = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }] });
    expect(c.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(c.usage!.completion_tokens).toBeGreaterThan(0);
    const m = await anthropic.messages.stream({ model, max_tokens: 200, messages: [{ role: 'user', content: 'Hello' }] }).finalMessage();
    expect(m.content.some((b) => b.type === 'text')).toBe(true);
    expect(m.usage.output_tokens).toBeGreaterThan(0);
    const r = await openai.responses.create({ model, input: 'Hello' });
    expect(r.output_text.length).toBeGreaterThan(0);
  });

  it('credentials, not headers: every provider model names its credential, Vertex exchanges a service account key, Bedrock is SigV4-signed', async () => {
    const { resources } = await loadManifests(QUICKSTART);
    for (const r of resources) {
      const o = r.object as { metadata: { name: string }; spec?: { backends?: Record<string, unknown>[] } };
      for (const b of o.spec?.backends ?? []) expect(b.headers, o.metadata.name).toBeUndefined();
      if (MODELS.includes(o.metadata.name)) expect(o.spec!.backends![0]!.credentials, o.metadata.name).toMatchObject({ env: expect.stringMatching(/^SIM_/) });
    }
    expect(tokenExchanges.get(stack.sim.context)).toBeGreaterThan(0);
    const bedrock = stack.sim.recorder.all().filter((q) => q.path.startsWith('/model/'));
    expect(bedrock.length).toBeGreaterThan(0);
    for (const q of bedrock) expect(q.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIASIMULATOR/);
  });
});
