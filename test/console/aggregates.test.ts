import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { ADMIN, billingStack, C, until, type BillingStack } from '../billing/support.js';

/** Usage over time from the hourly rollup, for a key (API port) and across accounts (admin port). */
const ALICE = 'sk-service-agg-alice';
const BOB = 'sk-service-agg-bob';

function resources(sim: string) {
  const pricing = { inputPerMillion: '1', outputPerMillion: '2' };
  return [
    chatRoute('m1', `${sim}/v1`, { pricing }),
    chatRoute('m2', `${sim}/v1`, { pricing }),
    group('g', ['m1', 'm2']),
    apiKey('alice', ALICE, 'g', { account: 'team' }),
    apiKey('bob', BOB, 'g', { account: 'other' }),
  ];
}

async function get(url: string, token: string) {
  const r = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

type Summary = { data: Record<string, unknown>[]; totals: { requests: number; credits: string; output_tokens: number } };

for (const sc of storeCases()) {
  describe(`usage summaries on ${sc.name}`, () => {
    let s: BillingStack;
    beforeAll(async () => {
      s = await billingStack(sc, resources);
      await s.grant('team', 100n * C);
      await s.grant('other', 100n * C);
    });
    afterAll(() => s?.dispose());

    it('sums a key by model and hour; another key and other filters see their own', async () => {
      const alice = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: ALICE, maxRetries: 0 });
      const bob = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: BOB, maxRetries: 0 });
      for (const model of ['m1', 'm1', 'm2']) await alice.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], stream: false });
      await bob.chat.completions.create({ model: 'm2', messages: [{ role: 'user', content: 'hi' }], stream: false });
      const own = await until(
        async () => (await get(`${s.gw.url}/v1/usage/summary?bucket=hour`, ALICE)).json as unknown as Summary,
        (v) => v.totals.requests === 3,
        10_000,
        'three records in the rollup',
      );
      const byModel = Object.fromEntries(own.data.map((r) => [r.model, r.requests]));
      expect(byModel).toEqual({ m1: 2, m2: 1 });
      expect(own.data[0]!.start).toMatch(/T\d\d:00:00\.000Z$/);
      // the rollup agrees with the records it sums
      const records = (await get(`${s.gw.url}/v1/usage?limit=10`, ALICE)).json.data as { credits: string; output_tokens: number }[];
      const sum = records.reduce((a, r) => a + Number(r.credits), 0);
      expect(Number(own.totals.credits)).toBeCloseTo(sum, 6);
      expect(own.totals.output_tokens).toBe(records.reduce((a, r) => a + r.output_tokens, 0));

      const days = (await get(`${s.gw.url}/v1/usage/summary?bucket=day&group_by=none`, ALICE)).json as unknown as Summary;
      expect(days.data).toHaveLength(1);
      expect(days.data[0]).toMatchObject({ requests: 3, start: expect.stringMatching(/T00:00:00\.000Z$/) });
      expect((await get(`${s.gw.url}/v1/usage/summary?account=other`, ALICE)).status).toBe(400);

      const all = (await get(`${s.gw.adminUrl}/admin/v1/usage/summary?group_by=account`, ADMIN)).json as unknown as Summary;
      expect(Object.fromEntries(all.data.map((r) => [r.account, r.requests]))).toEqual({ team: 3, other: 1 });
      const m2 = (await get(`${s.gw.adminUrl}/admin/v1/usage/summary?group_by=key&model=m2`, ADMIN)).json as unknown as Summary;
      expect(Object.fromEntries(m2.data.map((r) => [r.key, r.requests]))).toEqual({ alice: 1, bob: 1 });
    });

    it('refuses ranges a chart cannot show and bad values with 400', async () => {
      for (const q of [
        'bucket=week',
        'group_by=colour',
        'since=2020-01-01&until=2020-03-01&bucket=hour',
        'since=yesterday',
        'since=2030-01-01&until=2029-01-01',
      ]) {
        const r = await get(`${s.gw.adminUrl}/admin/v1/usage/summary?${q}`, ADMIN);
        expect(r.status, q).toBe(400);
      }
    });

    it('lists accounts with balance, held and available', async () => {
      const r = await get(`${s.gw.adminUrl}/admin/v1/accounts`, ADMIN);
      const rows = r.json.data as { account: string; available: string }[];
      expect(rows.map((a) => a.account)).toEqual(['other', 'team']);
      expect(Number(rows[1]!.available)).toBeLessThan(100);
    });
  });
}
