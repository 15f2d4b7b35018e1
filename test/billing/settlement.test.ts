import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeCaptures, type CaptureItem } from '../../proxy/billing/commit.js';
import { chatCost } from '../../proxy/billing/pricing.js';
import type { Usage } from '../../proxy/billing/types.js';
import { toPrices } from '../../proxy/config/runtime.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { billingStack, books, C, expectExactBooks, until, usageOf, type BillingStack } from './support.js';

/**
 * How each way a chat request can end is settled: completed, cancelled by the client under each
 * disconnect policy, failed upstream before the first byte or in the middle of the stream; and
 * that replaying a capture changes nothing.
 */
const KEY = 'sk-service-settle-delivered';
const DRAIN_KEY = 'sk-service-settle-drain';
const prices = toPrices({ inputPerMillion: '1000000', outputPerMillion: '2000000' });
const rid = (tag: string) => `${tag}-${randomBytes(6).toString('hex')}`;

function resources(sim: string) {
  const pricing = { inputPerMillion: '1', outputPerMillion: '2' };
  return [
    chatRoute('m', `${sim}/v1`, { pricing, backend: { model: 'gpt-sim' } }),
    chatRoute('claude', sim, { backend: { provider: 'anthropic', model: 'claude-sim' }, pricing }),
    group('delivered', ['m', 'claude']),
    group('drainers', ['m'], { disconnectPolicy: 'drain' }),
    apiKey('delivered-key', KEY, 'delivered', { account: 'acct' }),
    apiKey('drain-key', DRAIN_KEY, 'drainers', { account: 'acct' }),
  ];
}

/** Reads five chunks, then goes away (the SDK ends the iteration quietly or with an abort error). */
async function readThenLeave(stream: AsyncIterable<unknown>, ac: AbortController): Promise<void> {
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 5) ac.abort();
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  expect(chunks).toBeGreaterThanOrEqual(5);
}

const costOf = (r: Record<string, unknown>) =>
  chatCost(prices, {
    inputTokens: Number(r.input_tokens),
    cachedInputTokens: Number(r.cached_input_tokens),
    cacheWriteTokens: Number(r.cache_write_tokens),
    outputTokens: Number(r.output_tokens),
    reasoningTokens: Number(r.reasoning_tokens),
  });

for (const sc of storeCases()) {
  describe(`settlement on ${sc.name}`, () => {
    let s: BillingStack;
    let openai: OpenAI;
    let drainer: OpenAI;
    beforeAll(async () => {
      // Idle leases go back quickly, so "nothing held" can be observed between tests.
      s = await billingStack(sc, resources, { idleMs: 200 });
      await s.grant('acct', 100n * C, 'settle-grant');
      openai = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
      drainer = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: DRAIN_KEY, maxRetries: 0 });
    });
    afterAll(async () => {
      if (!s) return;
      await s.close();
      const b = await books(s.store, 'acct');
      // Over every test of this file.
      expectExactBooks(b);
      await s.dispose();
    });

    const settledBooks = () =>
      until(
        () => books(s.store, 'acct'),
        (b) => b.held === 0n,
        10_000,
        'the lease to be handed back',
      );

    it('a completed stream is charged on the usage the upstream reported, with a full usage record', async () => {
      const id = rid('ok');
      const before = await settledBooks();
      const stream = await openai.chat.completions.create(
        { model: 'm', stream: true, messages: [{ role: 'user', content: 'count me' }] },
        { headers: { 'x-request-id': id } },
      );
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
      expect(usage).toBeDefined();
      // The stream's end reached the client only after its capture was durable: in the books, or in
      // the journal table they are written behind (PostgreSQL's default). One statement, one snapshot.
      const durable = await s.store.query<{ n: unknown }>(
        'SELECT (SELECT count(*) FROM usage_records WHERE request_id = $1) + (SELECT count(*) FROM billing_journal WHERE strpos(lines, $1) > 0) AS n',
        [id],
      );
      expect(Number(durable.rows[0]!.n)).toBeGreaterThan(0);
      await s.engine().booksCurrent();
      const rec = (await s.store.query<Record<string, unknown>>('SELECT * FROM usage_records WHERE request_id = $1', [id])).rows[0]!;
      expect(rec).toMatchObject({
        key_name: 'delivered-key',
        account: 'acct',
        group_name: 'delivered',
        model: 'm',
        upstream_model: 'gpt-sim',
        protocol: 'chat-completions',
      });
      expect(rec).toMatchObject({ usage_source: 'reported', status: 'ok', http_status: 200 });
      expect(Number(rec.input_tokens)).toBe(usage!.prompt_tokens);
      expect(Number(rec.output_tokens)).toBe(usage!.completion_tokens);
      expect(Number(rec.ttft_ms)).toBeGreaterThanOrEqual(0);
      expect(Number(rec.latency_ms)).toBeGreaterThanOrEqual(Number(rec.ttft_ms));
      // 1 micro-credit an input token, 2 an output token.
      expect(BigInt(rec.credits as string)).toBe(BigInt(usage!.prompt_tokens + 2 * usage!.completion_tokens));
      expect(JSON.stringify(rec)).not.toContain(KEY);
      const after = await settledBooks();
      expect(after.balance).toBe(before.balance - BigInt(rec.credits as string));
    });

    it('bill-delivered: a client that leaves mid-stream stops the upstream and pays an estimate of what it was sent', async () => {
      const id = rid('gone');
      s.sim.context.chunkDelayMs = 20;
      try {
        const ac = new AbortController();
        const stream = await openai.chat.completions.create(
          { model: 'm', stream: true, messages: [{ role: 'user', content: `[sim:tokens=200] leave early ${id}` }] },
          { headers: { 'x-request-id': id }, signal: ac.signal },
        );
        await readThenLeave(stream, ac);
        const rec = await usageOf(s.store, id);
        expect(rec).toMatchObject({ status: 'cancelled', usage_source: 'estimated', http_status: 499 });
        expect(Number(rec.output_tokens)).toBeGreaterThan(0);
        expect(Number(rec.output_tokens)).toBeLessThan(200);
        expect(BigInt(rec.credits as string)).toBe(costOf(rec));
        expect(BigInt(rec.credits as string)).toBeGreaterThan(0n);
        await until(async () => s.sim.recorder.find(id)[0]?.aborted, Boolean, 5_000, 'the upstream call to be aborted');
      } finally {
        s.sim.context.chunkDelayMs = 0;
      }
    });

    it('drain: a client that leaves mid-stream pays the final usage the upstream reported after being read to its end', async () => {
      const id = rid('drain');
      s.sim.context.chunkDelayMs = 10;
      try {
        const ac = new AbortController();
        const stream = await drainer.chat.completions.create(
          { model: 'm', stream: true, messages: [{ role: 'user', content: `[sim:tokens=100] drain me ${id}` }] },
          { headers: { 'x-request-id': id }, signal: ac.signal },
        );
        await readThenLeave(stream, ac);
        const rec = await usageOf(s.store, id);
        expect(rec).toMatchObject({ status: 'cancelled', usage_source: 'reported', key_name: 'drain-key', group_name: 'drainers' });
        expect(Number(rec.output_tokens)).toBe(100);
        expect(BigInt(rec.credits as string)).toBe(costOf(rec));
        expect(s.sim.recorder.find(id)[0]?.aborted).toBe(false);
      } finally {
        s.sim.context.chunkDelayMs = 0;
      }
    });

    it('an upstream error before the first byte is passed through and costs nothing: the hold is released in full', async () => {
      const id = rid('e500');
      const before = await settledBooks();
      await expect(
        openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: '[sim:500] fail first' }] }, { headers: { 'x-request-id': id } }),
      ).rejects.toMatchObject({ status: 500 });
      const rec = await usageOf(s.store, id);
      expect(rec).toMatchObject({ status: 'upstream_error', http_status: 500 });
      expect(BigInt(rec.credits as string)).toBe(0n);
      const after = await settledBooks();
      expect(after.balance).toBe(before.balance);
      expect(after.held).toBe(0n);
    });

    it('an upstream error in the middle of a stream charges what the upstream reported (input) plus an estimate of what was delivered', async () => {
      const id = rid('mid');
      const anthropic = new Anthropic({ baseURL: s.gw.url, apiKey: KEY, maxRetries: 0 });
      const stream = anthropic.messages.stream(
        { model: 'claude', max_tokens: 500, messages: [{ role: 'user', content: `[sim:fail] [sim:tokens=40] break midway ${id}` }] },
        { headers: { 'x-request-id': id } },
      );
      let reportedInput = -1;
      let text = '';
      await expect(
        (async () => {
          for await (const ev of stream) {
            if (ev.type === 'message_start')
              reportedInput =
                ev.message.usage.input_tokens + (ev.message.usage.cache_read_input_tokens ?? 0) + (ev.message.usage.cache_creation_input_tokens ?? 0);
            if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
          }
        })(),
      ).rejects.toThrow();
      expect(reportedInput).toBeGreaterThan(0);
      expect(text.length).toBeGreaterThan(0);
      const rec = await usageOf(s.store, id);
      expect(rec).toMatchObject({ status: 'upstream_error', usage_source: 'estimated', protocol: 'messages', upstream_model: 'claude-sim' });
      expect(Number(rec.input_tokens)).toBe(reportedInput);
      expect(Number(rec.output_tokens)).toBeGreaterThan(0);
      expect(Number(rec.output_tokens)).toBeLessThan(40);
      expect(BigInt(rec.credits as string)).toBe(costOf(rec));
    });

    it('a stream cut by the upstream (no terminal event) is charged on an estimate and ends with an error event', async () => {
      const id = rid('cut');
      const stream = await openai.chat.completions.create(
        { model: 'm', stream: true, messages: [{ role: 'user', content: `[sim:cut] [sim:tokens=40] cut ${id}` }] },
        { headers: { 'x-request-id': id } },
      );
      await expect(
        (async () => {
          for await (const _ of stream);
        })(),
      ).rejects.toThrow();
      const rec = await usageOf(s.store, id);
      expect(rec).toMatchObject({ status: 'upstream_error', usage_source: 'estimated' });
      expect(BigInt(rec.credits as string)).toBeGreaterThan(0n);
      expect(BigInt(rec.credits as string)).toBe(costOf(rec));
    });

    it('a replayed capture (a group commit retried after it landed) changes nothing', async () => {
      const before = await settledBooks();
      const usage: Usage = { inputTokens: 10, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 5, reasoningTokens: 0 };
      const item: CaptureItem = {
        operationId: `chat:${randomBytes(8).toString('hex')}`,
        leaseId: undefined,
        record: {
          requestId: rid('replay'),
          keyName: 'delivered-key',
          keyHash: 'h',
          account: 'acct',
          group: 'delivered',
          model: 'm',
          upstreamModel: 'gpt-sim',
          protocol: 'chat-completions',
          usage,
          credits: chatCost(prices, usage),
          usageSource: 'reported',
          status: 'ok',
          httpStatus: 200,
          latencyMs: 3,
        },
      };
      const first = await s.store.tx((q) => writeCaptures(q, [item]));
      expect(first.applied).toBe(1);
      const again = await s.store.tx((q) => writeCaptures(q, [item, item]));
      expect(again.applied).toBe(0);
      const after = await books(s.store, 'acct');
      expect(after.balance).toBe(before.balance - 20n);
      const recs = await s.store.query('SELECT 1 FROM usage_records WHERE request_id = $1', [item.record.requestId]);
      expect(recs.rows).toHaveLength(1);
    });

    it('settle() called twice on one charge writes one capture', async () => {
      const engine = s.engine();
      const quote = {
        requestId: rid('twice'),
        keyHash: 'h2',
        keyName: 'delivered-key',
        account: 'acct',
        group: 'delivered',
        model: 'm',
        protocol: 'chat-completions' as const,
        prices,
        estimatedInputTokens: 10,
        maxOutputTokens: 100,
      };
      const before = await books(s.store, 'acct');
      const charge = await engine.holdChat(quote);
      expect(charge.heldMicro).toBe(210n);
      const outcome = {
        usage: { inputTokens: 10, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 300, reasoningTokens: 250 },
        usageSource: 'reported' as const,
        status: 'ok' as const,
        httpStatus: 200,
        upstreamModel: 'gpt-sim',
        latencyMs: 1,
      };
      await Promise.all([charge.settle(outcome), charge.settle(outcome)]);
      await charge.settle(outcome);
      const rec = await usageOf(s.store, quote.requestId);
      // More than the hold (reasoning): charged in full.
      expect(BigInt(rec.credits as string)).toBe(610n);
      expect(Number(rec.reasoning_tokens)).toBe(250);
      const recs = await s.store.query('SELECT 1 FROM usage_records WHERE request_id = $1', [quote.requestId]);
      expect(recs.rows).toHaveLength(1);
      expect((await books(s.store, 'acct')).balance).toBe(before.balance - 610n);
    });
  });
}
