import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../proxy/billing/index.js';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/front/features.js';
import { startGateway, type Gateway } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { compileOrThrow } from '../support/stack.js';
import { disposeStore, storeCases } from '../support/stores.js';
import type { Store } from '../../proxy/store/index.js';
import { KEY, taskResources } from '../tasks/support.js';

/**
 * Strings PostgreSQL cannot hold (NUL, unpaired surrogates), and their company, in every place a
 * client can put a string: path and query parameters, body fields, unknown keys. Whatever is
 * generated, the answer is never a 5xx and no balance moves.
 */
const ADMIN = 'fuzz-admin';
const bad = fc.constantFrom('\u0000', '\ud800', '\udfff', '\udbff\u0000');
const piece = fc.oneof(fc.string({ maxLength: 6 }), fc.string({ unit: 'binary', maxLength: 6 }), fc.constantFrom('é', '🙂', '%', '"', '\\', '/'));
/** A string with at least one character the store cannot hold, somewhere. */
const poison = fc.tuple(piece, bad, piece).map(([a, b, c]) => a + b + c);
const anyString = fc.oneof(poison, piece);

const enc = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    // A lone surrogate cannot be percent-encoded as UTF-8: send its replacement's bytes by hand.
    return [...s].map((ch) => (/[\ud800-\udfff]/.test(ch) ? '%ED%A0%80' : encodeURIComponent(ch))).join('');
  }
};

type Req = { method: 'GET' | 'POST'; path: string; body?: string; admin?: boolean };

const requests: fc.Arbitrary<Req> = fc.oneof(
  anyString.map((id) => ({ method: 'GET' as const, path: `/v1/images/generations/${enc(id)}` })),
  anyString.map((id) => ({ method: 'GET' as const, path: `/v1/videos/generations/${enc(id)}` })),
  anyString.map((id) => ({ method: 'POST' as const, path: `/v1/videos/generations/${enc(id)}/cancel`, body: '{}' })),
  fc
    .tuple(fc.constantFrom('model', 'since', 'until', 'cursor', 'limit', 'x'), anyString)
    .map(([k, v]) => ({ method: 'GET' as const, path: `/v1/usage?${k}=${enc(v)}` })),
  fc
    .tuple(fc.constantFrom('account', 'key', 'model', 'cursor'), anyString)
    .map(([k, v]) => ({ method: 'GET' as const, path: `/admin/v1/usage?${k}=${enc(v)}`, admin: true })),
  anyString.map((id) => ({ method: 'GET' as const, path: `/admin/v1/tasks/${enc(id)}`, admin: true })),
  anyString.map((a) => ({ method: 'GET' as const, path: `/admin/v1/accounts/${enc(a)}`, admin: true })),
  fc.tuple(poison, fc.constantFrom('1', 'x', '-1')).map(([a, amount]) => ({
    method: 'POST' as const,
    path: `/admin/v1/accounts/${enc(a)}/grants`,
    body: JSON.stringify({ amount }),
    admin: true,
  })),
  fc.tuple(fc.constantFrom('prompt', 'negative_prompt', 'webhook_secret', 'webhook_url', 'size', 'quality', 'x_unknown'), poison).map(([field, v]) => ({
    method: 'POST' as const,
    path: '/v1/images/generations',
    body: JSON.stringify({ model: 'img-openai', prompt: 'a cat', [field]: v }),
  })),
  fc.tuple(poison, fc.string({ maxLength: 4 })).map(([key, v]) => ({
    method: 'POST' as const,
    path: '/v1/images/generations',
    body: JSON.stringify({ model: 'img-openai', prompt: 'a cat', [key]: v }),
  })),
  fc.tuple(fc.constantFrom('prompt', 'negative_prompt', 'webhook_secret', 'resolution', 'y_unknown'), poison).map(([field, v]) => ({
    method: 'POST' as const,
    path: '/v1/videos/generations',
    body: JSON.stringify({ model: 'vid', prompt: 'a dog', [field]: v }),
  })),
  anyString.map((m) => ({
    method: 'POST' as const,
    path: '/v1/chat/completions',
    body: JSON.stringify({ model: m, messages: [{ role: 'user', content: 'hi' }] }),
  })),
);

for (const sc of storeCases()) {
  describe(`bad strings on ${sc.name}`, () => {
    let store: Store;
    let sim: Simulator;
    let gw: Gateway;
    beforeAll(async () => {
      store = await sc.open();
      sim = await startSimulator();
      gw = await startGateway({
        source: new StaticConfigSource(compileOrThrow(taskResources(sim.url))),
        store,
        port: 0,
        adminPort: 0,
        adminToken: ADMIN,
        log: createLogger({}, 'silent'),
        billing: defaultBilling,
        features: defaultFeatures,
        options: { allowLoopbackURLs: true },
      });
      await store.tx((q) => credit(q, { account: 'acct', operationId: 'fuzz-grant', amount: 100_000_000n }));
    });
    afterAll(async () => {
      await gw?.close();
      await sim?.close();
      if (store) await disposeStore(store);
    });

    it('thousands of generated requests: never a 5xx, and no balance moves', async () => {
      const balances = () =>
        store.query<{ account: string; balance: string; held: string }>('SELECT account, balance::text, held::text FROM accounts ORDER BY account');
      const before = (await balances()).rows;
      const seen = new Map<number, number>();
      await fc.assert(
        fc.asyncProperty(requests, async (r) => {
          const base = r.admin ? gw.adminUrl : gw.url;
          const res = await fetch(`${base}${r.path}`, {
            method: r.method,
            headers: { authorization: `Bearer ${r.admin ? ADMIN : KEY}`, ...(r.body ? { 'content-type': 'application/json' } : {}) },
            ...(r.body ? { body: r.body } : {}),
          });
          const text = await res.text();
          seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
          if (res.status >= 500) throw new Error(`${r.method} ${r.path} ${r.body ?? ''} -> ${res.status} ${text}`);
        }),
        { numRuns: 2000 },
      );
      expect((await balances()).rows).toEqual(before);
      // The property reached the stores' validation, not only the router's 404s.
      expect(seen.get(400) ?? 0).toBeGreaterThan(500);
    }, 120_000);
  });
}
