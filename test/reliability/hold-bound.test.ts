import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../proxy/billing/index.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { billingStack, books, expectExactBooks, type BillingStack } from '../billing/support.js';

/**
 * Money is bounded by the hold: the upstream is sent the output cap the hold was sized for, each
 * of `n` answers is held for it, and the input is estimated high (non-Latin text included). An
 * upstream that would answer far more than asked (here: 5,000 words a choice) cannot take an
 * account below zero, however many requests run at once.
 */
const KEY = 'sk-service-hold-bound';
const CAP = 200;
/** Enough for a handful of these requests (each holds about 2,500 micro-credits). */
const FUNDS = 20_000n;

function resources(sim: string) {
  return [
    // 1 and 2 micro-credits a token; answers capped at CAP tokens unless the client asks for fewer.
    chatRoute('m', `${sim}/v1`, { maxOutputTokens: CAP, pricing: { inputPerMillion: '1', outputPerMillion: '2' } }),
    group('g', ['m']),
    apiKey('k', KEY, 'g', { account: 'small' }),
  ];
}

for (const sc of storeCases()) {
  describe(`the hold bounds the charge on ${sc.name}`, () => {
    let s: BillingStack;
    let client: OpenAI;
    beforeAll(async () => {
      s = await billingStack(sc, resources, { idleMs: 60_000 });
      client = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
    });
    afterAll(() => s?.dispose());

    it('n above the maximum is a 400 naming n, and charges nothing', async () => {
      await s.store.tx((q) => credit(q, { account: 'small', operationId: 'hold-bound-grant', amount: FUNDS }));
      const err = await client.chat.completions.create({ model: 'm', n: 9, messages: [{ role: 'user', content: 'hi' }] }).then(
        () => undefined,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
      expect(err?.status).toBe(400);
      expect(err?.error).toMatchObject({ param: 'n', type: 'invalid_request_error' });
      expect((await books(s.store, 'small')).balance).toBe(FUNDS);
    });

    it('50 concurrent requests asking for 4 long answers each (and CJK prompts) never take a small account below zero; the books are exact', async () => {
      const cjk = '網關按量計費'.repeat(150); // 900 characters: about 900 tokens, 2,700 UTF-8 bytes
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          client.chat.completions
            .create({ model: 'm', n: 4, stream: i % 2 === 0, messages: [{ role: 'user', content: `${i % 3 === 0 ? cjk : 'x'} [sim:tokens=5000] ${i}` }] })
            .then(
              async (r) => {
                // Streams and JSON alike: drain, then count what the upstream produced.
                if (Symbol.asyncIterator in r) for await (const _ of r);
                return 200;
              },
              (e: unknown) => (e as InstanceType<typeof OpenAI.APIError>).status ?? 0,
            ),
        ),
      );
      const ok = results.filter((r) => r === 200).length;
      expect(ok).toBeGreaterThan(0);
      expect(results.every((r) => r === 200 || r === 402)).toBe(true);
      // The gateway stops: captures flushed, its lease handed back.
      await s.close();
      const b = await books(s.store, 'small');
      expect(b.balance).toBeGreaterThanOrEqual(0n);
      expectExactBooks(b);
      // Every answer was cut at the cap the hold was sized for, 4 choices each.
      const r = await s.store.query<{ o: number }>("SELECT MAX(output_tokens)::int AS o FROM usage_records WHERE account = 'small'");
      expect(r.rows[0]!.o).toBeLessThanOrEqual(4 * CAP);
    });
  });
}
