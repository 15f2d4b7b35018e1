import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadManifests } from '../../proxy/config/folder-source.js';
import { startStack, type Stack } from '../support/stack.js';

/**
 * The quickstart's provider models as shipped (the simulator's fixed address replaced by this
 * test's): each is in the default group and answers through all three client endpoints.
 */
const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/', import.meta.url));
const KEY = 'sk-service-quickstart';
const MODELS = ['sim-gemini', 'sim-vertex-gemini', 'sim-vertex-claude', 'sim-bedrock', 'sim-azure', 'sim-deepseek'];
let stack: Stack;

beforeAll(async () => {
  const { resources, errors } = await loadManifests(QUICKSTART);
  expect(errors).toEqual([]);
  stack = await startStack((sim) => resources.map((r) => JSON.parse(JSON.stringify(r.object).replaceAll('http://127.0.0.1:8090', sim)) as object));
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
});
