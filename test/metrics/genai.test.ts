import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../kernel/log.js';
import { deadPort } from '../support/ports.js';
import { scrape, seriesOf, total, type Sample } from '../support/prom.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';

const KEY = `sk-service-metrics-${randomBytes(8).toString('hex')}`;
const lines: Record<string, unknown>[] = [];
const raw: string[] = [];
const recording = (base: Record<string, unknown> = {}): Logger => {
  const write = (level: string) => (msg: string, fields?: Record<string, unknown>) => {
    const line = { level, msg, ...base, ...fields };
    raw.push(JSON.stringify(line));
    lines.push(line);
  };
  return { info: write('info'), warn: write('warn'), error: write('error'), child: (f) => recording({ ...base, ...f }) };
};

let stack: Stack;
let openai: OpenAI;
let anthropic: Anthropic;
let simHost: string;

beforeAll(async () => {
  const dead = await deadPort();
  stack = await startStack(
    (sim) => [
      chatRoute('sim-gpt', `${sim}/v1`, { backend: { model: 'gpt-sim' } }),
      chatRoute('sim-claude', sim, { backend: { provider: 'anthropic', model: 'claude-sim' } }),
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
      group('team-a', ['sim-gpt', 'sim-claude', 'multi']),
      apiKey('alice', KEY, 'team-a'),
    ],
    { log: recording() },
  );
  simHost = new URL(stack.sim.url).host;
  openai = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: stack.gw.url, apiKey: KEY, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
});

async function drain(stream: AsyncIterable<unknown>) {
  for await (const _ of stream);
}

/** One round of every kind of request the dashboard shows. */
async function traffic(prompt: string) {
  await drain(await openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: `${prompt} [sim:tokens=20]` }], stream: true }));
  await openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: prompt }], stream: false });
  await anthropic.messages.create({ model: 'sim-claude', max_tokens: 100, messages: [{ role: 'user', content: prompt }] });
  await openai.chat.completions.create({ model: 'multi', messages: [{ role: 'user', content: prompt }], stream: false });
  await expect(
    openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: `${prompt} [sim:500]` }], stream: false }),
  ).rejects.toThrow();
  await expect(openai.chat.completions.create({ model: `no-such-${prompt}`, messages: [{ role: 'user', content: prompt }] })).rejects.toThrow();
  const stranger = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: `sk-service-${prompt}`, maxRetries: 0 });
  await expect(stranger.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: prompt }] })).rejects.toThrow();
  await fetch(`${stack.gw.url}/v1/${prompt}`);
}

const settle = () => new Promise((r) => setTimeout(r, 100));

describe('GenAI metrics', () => {
  let after: Sample[];

  it('count tokens, time to first token, credits, outcomes, upstream calls and failovers with config-bounded labels', async () => {
    await traffic('hello-metrics');
    await settle();
    after = await scrape(stack.gw.adminUrl);
    const gpt = { gen_ai_request_model: 'sim-gpt', gen_ai_provider_name: 'openai', group: 'team-a', backend: `${simHost}/v1`, protocol: 'chat-completions' };

    expect(total(after, 'gen_ai_client_token_usage_count', { ...gpt, gen_ai_token_type: 'output' })).toBe(2); // the stream and the JSON answer (the 500 reported no usage)
    expect(total(after, 'gen_ai_client_token_usage_sum', { ...gpt, gen_ai_token_type: 'output' })).toBeGreaterThanOrEqual(20);
    expect(total(after, 'gen_ai_server_time_to_first_token_seconds_count', gpt)).toBe(1);
    expect(total(after, 'gen_ai_server_time_per_output_token_seconds_count', gpt)).toBe(1);
    expect(
      total(after, 'gen_ai_server_request_duration_seconds_count', {
        gen_ai_request_model: 'sim-claude',
        gen_ai_provider_name: 'anthropic',
        protocol: 'messages',
      }),
    ).toBe(1);
    expect(total(after, 'tollgate_credits_charged_total', { model: 'sim-gpt', group: 'team-a', kind: 'chat' })).toBeGreaterThan(0);

    expect(total(after, 'tollgate_requests_total', { route: '/v1/chat/completions', model: 'sim-gpt', outcome: 'ok' })).toBe(2);
    expect(total(after, 'tollgate_requests_total', { route: '/v1/chat/completions', model: 'sim-gpt', outcome: 'upstream_error' })).toBe(1);
    expect(
      total(after, 'tollgate_requests_total', { route: '/v1/chat/completions', model: '', group: 'team-a', outcome: 'refused', reason: 'model_not_found' }),
    ).toBe(1);
    expect(
      total(after, 'tollgate_requests_total', { route: '/v1/chat/completions', model: '', group: '', outcome: 'refused', reason: 'invalid_api_key' }),
    ).toBe(1);
    expect(total(after, 'tollgate_requests_total', { route: 'unmatched', outcome: 'refused', reason: 'not_found' })).toBe(1);

    expect(total(after, 'tollgate_upstream_requests_total', { backend: `${simHost}/v1`, status_class: '2xx' })).toBe(3);
    expect(total(after, 'tollgate_upstream_requests_total', { backend: `${simHost}/v1`, status_class: '5xx' })).toBe(1);
    expect(total(after, 'tollgate_upstream_requests_total', { backend: `${simHost}`, gen_ai_provider_name: 'anthropic', status_class: '2xx' })).toBe(1);
    expect(total(after, 'tollgate_upstream_requests_total', { status_class: 'unavailable' })).toBe(1);
    expect(total(after, 'tollgate_failovers_total', { model: 'multi' })).toBe(1);

    // The dead primary of `multi` is cooling down; the model still has a ready backend.
    expect(total(after, 'tollgate_model_backends', { model: 'multi' })).toBe(2);
    expect(total(after, 'tollgate_model_backends_cooling_down', { model: 'multi' })).toBe(1);
    expect(total(after, 'tollgate_model_backends_cooling_down', { model: 'sim-claude' })).toBe(0);
    expect(total(after, 'tollgate_webhook_backlog')).toBe(0);
  });

  it('keep their series when clients send other keys, models, paths, prompts and request ids', async () => {
    // The process's own metrics (GC kinds appear as they first run) are not the gateway's labels.
    const ours = (list: Sample[]) => list.filter((x) => /^(gen_ai_|tollgate_)/.test(x.name));
    const before = seriesOf(ours(after));
    for (let i = 0; i < 3; i++) await traffic(`p${randomBytes(6).toString('hex')}`);
    await settle();
    const samples = await scrape(stack.gw.adminUrl);
    const grown = [...seriesOf(ours(samples))].filter((s) => !before.has(s));
    expect(grown).toEqual([]);

    // Every label value is a name from the config, a protocol, a closed code or a number.
    const bounded = new Set(['', 'team-a', 'sim-gpt', 'sim-claude', 'multi', 'openai', 'anthropic', 'chat', 'input', 'output', 'chat-completions', 'messages']);
    for (const s of samples.filter((x) => /^(gen_ai_|tollgate_(requests|credits|upstream|failovers|model_|backend_))/.test(x.name))) {
      for (const [k, v] of Object.entries(s.labels)) {
        if (k === 'le' || k === 'route' || k === 'reason' || k === 'outcome' || k === 'status_class') continue;
        if (k === 'backend') expect([simHost, `${simHost}/v1`]).toContain(v.replace(/^127\.0\.0\.1:\d+\/v1$/, `${simHost}/v1`));
        else expect(bounded, `${s.name} ${k}="${v}"`).toContain(v);
      }
    }
    const text = samples.map((s) => JSON.stringify(s)).join('\n');
    expect(text).not.toContain(KEY);
    expect(text).not.toContain('hello-metrics');
    expect(text).not.toMatch(/sk-service/);
  });
});

describe('access log', () => {
  it('one line per request with key name, group, model, backend, tokens, credits and TTFT; no key and no prompt', async () => {
    lines.length = 0;
    raw.length = 0;
    const id = `acc-${randomBytes(4).toString('hex')}`;
    await drain(
      await openai.chat.completions.create(
        { model: 'sim-gpt', messages: [{ role: 'user', content: 'secret-prompt-words [sim:tokens=5]' }], stream: true },
        { headers: { 'x-request-id': id } },
      ),
    );
    await settle();
    const mine = lines.filter((l) => l.msg === 'request' && l.requestId === id);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({
      level: 'info',
      method: 'POST',
      route: '/v1/chat/completions',
      status: 200,
      outcome: 'ok',
      key: 'alice',
      group: 'team-a',
      model: 'sim-gpt',
      protocol: 'chat-completions',
      backend: `${simHost}/v1`,
      provider: 'openai',
      usageSource: 'reported',
    });
    expect(mine[0]!.outputTokens).toBeGreaterThanOrEqual(5);
    expect(BigInt(mine[0]!.creditsMicro as string)).toBeGreaterThan(0n);
    expect(mine[0]!.ttftMs).toBeGreaterThan(0);
    expect(mine[0]!.latencyMs).toBeGreaterThanOrEqual(mine[0]!.ttftMs as number);

    await expect(
      openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'x [sim:500]' }] }, { headers: { 'x-request-id': `${id}-e` } }),
    ).rejects.toThrow();
    await settle();
    expect(lines.find((l) => l.msg === 'request' && l.requestId === `${id}-e`)).toMatchObject({ level: 'warn', status: 500, outcome: 'upstream_error' });
    const all = raw.join('\n');
    expect(all).not.toContain(KEY);
    expect(all).not.toContain('secret-prompt-words');
  });
});
