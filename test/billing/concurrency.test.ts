import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeCaptures } from '../../proxy/billing/commit.js';
import { chatCost, chatHold } from '../../proxy/billing/pricing.js';
import { hashKey } from '../../proxy/auth/keys.js';
import { toPrices } from '../../proxy/config/runtime.js';
import { estimateTokens } from '../../proxy/ir/usage.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { billingStack, books, C, expectExactBooks, until, type BillingStack } from './support.js';

/**
 * Admission under load: every request is admitted against credits that are really there, the
 * rest get 402 before anything goes upstream, and afterwards the books add up to the micro-credit.
 */
const KEY = 'sk-service-billing-load';
const LIMITED = 'sk-service-billing-limited';
const BROKE = 'sk-service-billing-broke';
const HOT = 'sk-service-billing-hot';
const MAX_TOKENS = 1000;
const prices = toPrices({ inputPerMillion: '1000000', outputPerMillion: '2000000' });

function resources(sim: string) {
  return [
    // 1 and 2 micro-credits a token: holds and costs are easy to follow.
    chatRoute('m', `${sim}/v1`, { pricing: { inputPerMillion: '1', outputPerMillion: '2' } }),
    chatRoute('claude', sim, { backend: { provider: 'anthropic' }, pricing: { inputPerMillion: '1', outputPerMillion: '2' } }),
    group('g', ['m', 'claude']),
    apiKey('load', KEY, 'g', { account: 'load' }),
    apiKey('limited', LIMITED, 'g', { account: 'rich', spendLimit: '0.00009' }),
    apiKey('broke', BROKE, 'g', { account: 'empty' }),
    apiKey('hot', HOT, 'g', { account: 'rich', spendLimit: '1' }),
  ];
}

const params = (i: number) => ({
  model: 'm',
  stream: false as const,
  max_tokens: MAX_TOKENS,
  messages: [{ role: 'user' as const, content: `load ${String(i).padStart(5, '0')}` }],
});
/** The body the SDK sends for params(i): every one has the same length, so every request holds the same amount. */
const body = (i: number) => JSON.stringify(params(i));

/** One chat call with the official SDK: its status and the body's usage or error. */
async function call(url: string, i: number): Promise<{ i: number; status: number; json: Record<string, any> }> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  try {
    const c = await client.chat.completions.create(params(i));
    return { i, status: 200, json: { usage: c.usage } };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError) || err.status === undefined) throw err;
    return { i, status: err.status, json: { error: err.error } };
  }
}

for (const sc of storeCases()) {
  describe(`credits under concurrency on ${sc.name}`, () => {
    let s: BillingStack;
    beforeAll(async () => {
      s = await billingStack(sc, resources, { idleMs: 60_000 });
    });
    afterAll(() => s?.dispose());

    it('500 concurrent requests on an account funded for 100: at most 100 upstream at once, the rest refused with 402 before going upstream, the books exact', async () => {
      // Every body has the same length, so every request holds the same amount.
      const hold = chatHold(prices, estimateTokens(Buffer.byteLength(body(0))), MAX_TOKENS);
      await s.grant('load', 100n * hold, 'load-grant');
      // Slow upstream: normally all 500 arrive while the first admitted ones are still upstream.
      s.sim.context.latencyMs = 5_000;
      // What must hold whatever the timing: never more requests upstream at once than the
      // account covers (a request leaves the simulator before its gateway settles it).
      let maxUpstream = 0;
      const watch = setInterval(() => {
        const open = s.sim.recorder.find('load ').filter((r) => !r.completed && !r.aborted).length;
        maxUpstream = Math.max(maxUpstream, open);
      }, 2);
      const results = await Promise.all(Array.from({ length: 500 }, (_, i) => call(s.gw.url, i)));
      clearInterval(watch);
      s.sim.context.latencyMs = 0;
      const ok = results.filter((r) => r.status === 200);
      const refused = results.filter((r) => r.status === 402);
      expect(ok.length + refused.length).toBe(500);
      expect(maxUpstream).toBeGreaterThan(50);
      expect(maxUpstream).toBeLessThanOrEqual(100);
      // Exactly 100 when all 500 arrive within the upstream's 5 s; more only if some arrived after
      // the first ones had finished and given their unused holds back.
      expect(ok.length).toBeGreaterThanOrEqual(100);
      expect(refused.length).toBeGreaterThan(0);
      for (const r of refused) {
        expect(r.json.error).toMatchObject({ code: 'insufficient_credits', type: 'insufficient_quota' });
        expect(s.sim.recorder.find(`load ${String(r.i).padStart(5, '0')}`)).toHaveLength(0);
      }
      // No request was served without a hold: the upstream saw exactly the admitted ones.
      expect(s.sim.recorder.find('load ').length).toBe(ok.length);

      // What the clients were told they used is what they were charged.
      const expected = ok.reduce(
        (sum, r) =>
          sum +
          chatCost(prices, {
            inputTokens: r.json.usage.prompt_tokens,
            cachedInputTokens: 0,
            cacheWriteTokens: 0,
            outputTokens: r.json.usage.completion_tokens,
            reasoningTokens: 0,
          }),
        0n,
      );
      const metrics = await (await fetch(`${s.gw.adminUrl}/metrics`)).text();
      expect(metrics).toContain(`tollgate_billing_refusals_total{reason="insufficient_credits"} ${refused.length}`);
      expect(metrics).toMatch(/tollgate_billing_captures_total \d+/);
      await s.close(); // flushes and hands the lease back
      const b = await books(s.store, 'load');
      expect(b.usageRecords).toBe(ok.length);
      expect(b.usageCredits).toBe(expected);
      expectExactBooks(b);
      expect(b.balance).toBe(100n * hold - expected);
      expect(b.balance).toBeGreaterThanOrEqual(0n);
    }, 60_000);
  });

  describe(`two replicas sharing an account on ${sc.name}`, () => {
    let a: BillingStack;
    let b: BillingStack;
    beforeAll(async () => {
      a = await billingStack(sc, resources, { idleMs: 300 });
      b = await billingStack({ shared: a.store }, resources, { idleMs: 300 });
    });
    afterAll(async () => {
      await b?.dispose();
      await a?.dispose();
    });

    it('lease slices of one account: together they never admit more than it holds, and idle leases go back', async () => {
      const hold = chatHold(prices, estimateTokens(Buffer.byteLength(body(0))), MAX_TOKENS);
      await a.grant('load', 60n * hold, 'shared-grant');
      a.sim.context.latencyMs = 5_000;
      b.sim.context.latencyMs = 5_000;
      let maxUpstream = 0;
      const open = (x: BillingStack) => x.sim.recorder.find('load ').filter((r) => !r.completed && !r.aborted).length;
      const watch = setInterval(() => (maxUpstream = Math.max(maxUpstream, open(a) + open(b))), 2);
      const fire = (s: BillingStack, from: number) => Array.from({ length: 100 }, async (_, i) => (await call(s.gw.url, from + i)).status);
      const statuses = await Promise.all([...fire(a, 0), ...fire(b, 1000)]);
      clearInterval(watch);
      a.sim.context.latencyMs = 0;
      b.sim.context.latencyMs = 0;
      const ok = statuses.filter((x) => x === 200).length;
      expect(statuses.filter((x) => x !== 200 && x !== 402)).toEqual([]);
      // Both replicas served: neither lease starved the other.
      expect(a.sim.recorder.find('load ').length).toBeGreaterThan(0);
      expect(b.sim.recorder.find('load ').length).toBeGreaterThan(0);
      // Together never more upstream at once than the account covers; slices cut at halves may
      // strand less than one hold per replica, and only requests arriving after the first ones
      // finished (a loaded machine) can add to the count.
      expect(maxUpstream).toBeLessThanOrEqual(60);
      expect(ok).toBeGreaterThanOrEqual(58);
      expect(statuses.filter((x) => x === 402).length).toBeGreaterThan(0);
      expect(a.sim.recorder.find('load ').length + b.sim.recorder.find('load ').length).toBe(ok);

      // Idle leases are handed back without a shutdown.
      const settled = await until(
        () => books(a.store, 'load'),
        (x) => x.held === 0n,
        10_000,
        'idle leases to be handed back',
      );
      expect(settled.openHolds).toBe(0);
      expect(settled.usageRecords).toBe(ok);
      expect(settled.balance).toBe(settled.grants - settled.usageCredits);
      expect(settled.violations).toEqual([]);
    }, 60_000);
  });

  describe(`a spend limit across two replicas on ${sc.name}`, () => {
    let a: BillingStack;
    let b: BillingStack;
    beforeAll(async () => {
      a = await billingStack(sc, resources, { idleMs: 200 });
      b = await billingStack({ shared: a.store }, resources, { idleMs: 200 });
      await a.grant('rich', 1000n * C, 'rich-grant');
      await a.grant('load', 1000n * C, 'busy-grant');
    });
    afterAll(async () => {
      await b?.dispose();
      await a?.dispose();
    });

    it('a replica learns what the key spent on another one and stops it at its limit, though busy with other keys', async () => {
      const onB = new OpenAI({ baseURL: `${b.gw.url}/v1`, apiKey: LIMITED, maxRetries: 0 });
      const onA = new OpenAI({ baseURL: `${a.gw.url}/v1`, apiKey: LIMITED, maxRetries: 0 });
      // B has seen the key (its spend is cached there) before A spends.
      await expect(onB.chat.completions.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'x'.repeat(400) }] })).rejects.toMatchObject({
        status: 402,
      });
      // Meanwhile B serves another key without a pause: behind a journal (PostgreSQL's default)
      // its books' writes then never go idle, which must not stop it from re-reading the spend.
      let busy = true;
      const other = new OpenAI({ baseURL: `${b.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
      const load = Promise.all(
        [0, 1, 2, 3].map(async (w) => {
          for (let i = 0; busy; i++)
            await other.chat.completions.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: `busy ${w} ${i}` }] });
        }),
      );
      await onA.chat.completions.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'spend on a' }] });
      // B re-reads the spend of the keys it knows every 100 ms here: after a few of those, B's
      // first call with this key is refused, although B itself never charged it.
      await new Promise((r) => setTimeout(r, 600));
      busy = false;
      await load;
      await expect(onB.chat.completions.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'spend on b' }] })).rejects.toMatchObject({
        status: 402,
        code: 'spend_limit_reached',
      });
      expect(b.sim.recorder.find('spend on b')).toHaveLength(0);
      expect((await books(a.store, 'rich')).usageRecords).toBe(1);
    });

    it('a replica serving a limited key without pause learns what another replica charged it', async () => {
      const onB = new OpenAI({ baseURL: `${b.gw.url}/v1`, apiKey: HOT, maxRetries: 0 });
      let busy = true;
      const refused: number[] = [];
      // Four requests at a time: the key always has some in flight or unwritten on B.
      const load = Promise.all(
        [0, 1, 2, 3].map(async (w) => {
          for (let i = 0; busy; i++) {
            try {
              await onB.chat.completions.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: `hot ${w} ${i}` }] });
            } catch (err) {
              if (!(err instanceof OpenAI.APIError) || err.code !== 'spend_limit_reached') throw err;
              refused.push(Date.now());
              await new Promise((r) => setTimeout(r, 10));
            }
          }
        }),
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(refused).toEqual([]);
      // Another replica's group commit charges the key its whole limit (1 credit).
      const usage = { inputTokens: 1_000_000, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 };
      const at = Date.now();
      await a.store.tx((q) =>
        writeCaptures(q, [
          {
            operationId: `chat:hot-elsewhere-${at}`,
            leaseId: undefined,
            record: {
              requestId: `hot-elsewhere-${at}`,
              keyName: 'hot',
              keyHash: hashKey(HOT),
              account: 'rich',
              group: 'g',
              model: 'm',
              upstreamModel: 'gpt-sim',
              protocol: 'chat-completions',
              usage,
              credits: C,
              usageSource: 'reported',
              status: 'ok',
              httpStatus: 200,
              latencyMs: 1,
            },
          },
        ]),
      );
      try {
        await until(
          async () => refused.length,
          (n) => n > 0,
          3_000,
          'B to refuse the key',
        );
      } finally {
        busy = false;
        await load;
      }
      // Within B's next group commits (every 100 ms behind the journal table; after every answer on the path).
      expect(refused[0]! - at).toBeLessThan(1_000);
    });
  });

  describe(`402s on ${sc.name}`, () => {
    let s: BillingStack;
    beforeAll(async () => {
      s = await billingStack(sc, resources);
      await s.grant('rich', 1000n * C);
    });
    afterAll(() => s?.dispose());

    it("a key at its spendLimit gets 402 even though its account has credits; /v1/credits shows the key's spend", async () => {
      const client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: LIMITED, maxRetries: 0 });
      // Holds about 60 micro-credits of the key's 90 and costs 36: the next one no longer fits.
      const first = await client.chat.completions.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'limit one' }] });
      expect(first.usage!.completion_tokens).toBeGreaterThan(0);
      await expect(client.chat.completions.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'limit two' }] })).rejects.toMatchObject({
        status: 402,
        code: 'spend_limit_reached',
        type: 'insufficient_quota',
      });
      expect(s.sim.recorder.find('limit two')).toHaveLength(0);
      const r = await fetch(`${s.gw.url}/v1/credits`, { headers: { authorization: `Bearer ${LIMITED}` } });
      const credits = (await r.json()) as { account: string; available: string; key: { name: string; spend_limit: string; spent: string } };
      expect(credits.account).toBe('rich');
      expect(credits.key.name).toBe('limited');
      expect(credits.key.spend_limit).toBe('0.000090');
      const spent = chatCost(prices, {
        inputTokens: first.usage!.prompt_tokens,
        cachedInputTokens: 0,
        cacheWriteTokens: 0,
        outputTokens: first.usage!.completion_tokens,
        reasoningTokens: 0,
      });
      expect(credits.key.spent).toBe(`0.${spent.toString().padStart(6, '0')}`);
    });

    it('an account without credits gets 402 in the Anthropic shape on /v1/messages, and nothing reaches the upstream', async () => {
      const client = new Anthropic({ baseURL: s.gw.url, apiKey: BROKE, maxRetries: 0 });
      const err = await client.messages
        .create({ model: 'claude', max_tokens: 100, messages: [{ role: 'user', content: 'broke anthropic' }] })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
      expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'billing_error' } });
      const openai = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: BROKE, maxRetries: 0 });
      await expect(openai.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'broke openai' }] })).rejects.toMatchObject({
        status: 402,
        code: 'insufficient_credits',
      });
      expect(s.sim.recorder.find('broke')).toHaveLength(0);
      const b = await books(s.store, 'empty');
      expect(b.usageRecords).toBe(0);
      expect(b.balance).toBe(0n);
    });
  });
}
