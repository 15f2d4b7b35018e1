import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../proxy/billing/index.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { billingStack, type BillingStack } from '../billing/support.js';

/**
 * The contract's order of chat errors: invalid request body (400); key missing, invalid or revoked
 * (401); insufficient account credits (402); group restricted (403); model not in the group (404).
 * Every request that breaks two of the rules gets the earlier one's status, in the endpoint's own
 * error shape, on all three chat endpoints and count_tokens.
 */
const RULES = ['body', 'key', 'credits', 'restricted', 'model'] as const;
type Rule = (typeof RULES)[number];
const STATUS: Record<Rule, number> = { body: 400, key: 401, credits: 402, restricted: 403, model: 404 };

const KEYS = {
  rich: 'sk-service-prec-rich',
  empty: 'sk-service-prec-empty',
  richCc: 'sk-service-prec-rich-cc',
  emptyCc: 'sk-service-prec-empty-cc',
};

function resources(sim: string) {
  return [
    chatRoute('m', `${sim}/v1`),
    chatRoute('c', sim, { backend: { provider: 'anthropic', model: 'claude-sim' } }),
    group('g', ['m', 'c']),
    group('cc', ['m', 'c'], { ccOnly: true }),
    apiKey('rich', KEYS.rich, 'g', { account: 'rich' }),
    apiKey('empty', KEYS.empty, 'g', { account: 'empty' }),
    apiKey('rich-cc', KEYS.richCc, 'cc', { account: 'rich' }),
    apiKey('empty-cc', KEYS.emptyCc, 'cc', { account: 'empty' }),
  ];
}

const ENDPOINTS = [
  { path: '/v1/chat/completions', shape: 'openai', body: (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }], stream: false }) },
  { path: '/v1/responses', shape: 'openai', body: (model: string) => ({ model, input: 'hi', stream: false }) },
  { path: '/v1/messages', shape: 'anthropic', body: (model: string) => ({ model, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }) },
  { path: '/v1/messages/count_tokens', shape: 'anthropic', body: (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }] }) },
] as const;

for (const sc of storeCases()) {
  describe(`the order of chat errors on ${sc.name}`, () => {
    let s: BillingStack;
    beforeAll(async () => {
      s = await billingStack(sc, resources);
      await s.store.tx((q) => credit(q, { account: 'rich', operationId: 'prec-grant', amount: 1_000_000_000n }));
    });
    afterAll(() => s?.dispose());

    for (const ep of ENDPOINTS) {
      for (let i = 0; i < RULES.length; i++) {
        for (let j = i + 1; j < RULES.length; j++) {
          const broken = new Set<Rule>([RULES[i]!, RULES[j]!]);
          it(`${ep.path}: ${RULES[i]} and ${RULES[j]} broken -> ${STATUS[RULES[i]!]}`, async () => {
            const key = broken.has('credits') ? (broken.has('restricted') ? KEYS.emptyCc : KEYS.empty) : broken.has('restricted') ? KEYS.richCc : KEYS.rich;
            const body = broken.has('body') ? '{"model": "m", ' : JSON.stringify(ep.body(broken.has('model') ? 'not-in-group' : 'c'));
            const r = await fetch(`${s.gw.url}${ep.path}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', ...(broken.has('key') ? {} : { authorization: `Bearer ${key}` }) },
              body,
            });
            const json = (await r.json()) as Record<string, unknown>;
            expect(r.status, JSON.stringify(json)).toBe(STATUS[RULES[i]!]);
            if (ep.shape === 'anthropic') expect(json).toMatchObject({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } });
            else expect(json).toMatchObject({ error: { type: expect.any(String), message: expect.any(String) } });
          });
        }
      }
    }
  });
}
