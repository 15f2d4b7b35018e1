import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CompiledBackend } from '../../api/snapshot/index.js';
import { Cooldowns, orderBackends } from '../../proxy/upstreams/index.js';
import { deadPort } from '../support/ports.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { RecordingBilling, rid, withRequestId } from './support.js';

const backend = (model: string, priority: number, weight = 1): CompiledBackend => ({
  provider: 'openai',
  baseURL: `http://b/${model}`,
  model,
  priority,
  weight,
  timeoutMs: 1000,
});

describe('orderBackends', () => {
  it('lowest priority first, by weight within a priority, cooling backends last', () => {
    const cooldowns = new Cooldowns();
    const list = [backend('a', 0, 1), backend('b', 0, 3), backend('c', 1)];
    // random() = 0.5 of a total weight of 4 lands on b (a covers [0, 1), b [1, 4)).
    expect(orderBackends(list, cooldowns, () => 0.5).map((b) => b.model)).toEqual(['b', 'a', 'c']);
    expect(orderBackends(list, cooldowns, () => 0.1).map((b) => b.model)).toEqual(['a', 'b', 'c']);
    cooldowns.coolDown(list[0]!, 60_000);
    expect(orderBackends(list, cooldowns, () => 0.1).map((b) => b.model)).toEqual(['b', 'c', 'a']);
  });

  it('a cooldown ends on time though the wall clock stepped back meanwhile', async () => {
    const cooldowns = new Cooldowns();
    const list = [backend('a', 0, 1), backend('b', 0, 1)];
    cooldowns.coolDown(list[0]!, 50);
    expect(cooldowns.isCooling(list[0]!)).toBe(true);
    const stepped = Date.now() - 60_000;
    const now = vi.spyOn(Date, 'now').mockImplementation(() => stepped);
    try {
      await new Promise((r) => setTimeout(r, 80));
      expect(cooldowns.isCooling(list[0]!)).toBe(false);
      expect(orderBackends(list, cooldowns, () => 0.1).map((b) => b.model)).toEqual(['a', 'b']);
    } finally {
      now.mockRestore();
    }
  });
});

const KEY = 'sk-service-failover-test';
const billing = new RecordingBilling();
let stack: Stack;
let client: OpenAI;
let deadURL: string;

beforeAll(async () => {
  const dead = await deadPort();
  deadURL = `http://127.0.0.1:${dead}/v1`;
  stack = await startStack(
    (sim) => [
      {
        ...chatRoute('multi', `${sim}/v1`),
        spec: {
          type: 'chat',
          backends: [
            { provider: 'openai', baseURL: `http://127.0.0.1:${dead}/v1`, model: 'primary', priority: 0 },
            { provider: 'openai', baseURL: `${sim}/v1`, model: 'secondary', priority: 1 },
          ],
          pricing: { inputPerMillion: '1', outputPerMillion: '2' },
        },
      },
      group('g', ['multi']),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
  client = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
});
afterAll(async () => {
  await stack.close();
});

describe('failover while nothing was sent', () => {
  it('an unreachable first backend is skipped for the next one, once, and then cools down', async () => {
    const id = rid('f-stream');
    let text = '';
    for await (const c of await client.chat.completions.create(
      { model: 'multi', stream: true, messages: [{ role: 'user', content: 'hi' }] },
      withRequestId(id),
    )) {
      text += c.choices[0]?.delta.content ?? '';
    }
    expect(text.length).toBeGreaterThan(0);
    expect(billing.settled(id)).toMatchObject({ status: 'ok', upstreamModel: 'secondary', usageSource: 'reported' });
    // The primary cools down (10 s after a connect error), so the next requests try it last.
    expect(stack.gw.deps.cooldowns.isCooling({ ...backend('primary', 0), baseURL: deadURL })).toBe(true);
    const id2 = rid('f-json');
    await client.chat.completions.create({ model: 'multi', messages: [{ role: 'user', content: 'again' }] }, withRequestId(id2));
    expect(billing.settled(id2)).toMatchObject({ status: 'ok', upstreamModel: 'secondary' });
  });
});
