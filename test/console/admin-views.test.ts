import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';

/** The operator console's views when the config comes from elsewhere (a cluster): keys read-only. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack((sim) => [chatRoute('m', `${sim}/v1`), group('g', ['m']), apiKey('k', 'sk-service-views', 'g')]);
});
afterAll(() => stack.close());

const admin = async (path: string, init: RequestInit = {}) => {
  const r = await fetch(`${stack.gw.adminUrl}${path}`, { ...init, headers: { authorization: 'Bearer test-admin', 'content-type': 'application/json' } });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
};

describe('operator views', () => {
  it('show the config in service, backends, the queues, and keys read-only with kubectl commands', async () => {
    const config = await admin('/admin/v1/config');
    expect(config.json).toMatchObject({
      mode: 'cluster',
      models: [{ model: 'm', type: 'chat', backends: 1 }],
      groups: [{ name: 'g', models: ['m'], keys: 1 }],
      keys: [{ name: 'k', group: 'g', account: 'acct' }],
      left_out: [],
    });
    expect((await admin('/admin/v1/backends')).json.data).toEqual([expect.objectContaining({ model: 'm', provider: 'openai', cooling_down: false })]);
    expect((await admin('/admin/v1/tasks')).json).toEqual({ data: [] });
    expect((await admin('/admin/v1/webhooks?status=pending')).json).toEqual({ data: [] });
    expect((await admin('/admin/v1/webhooks?status=lost')).status).toBe(400);
    const keys = await admin('/admin/v1/keys');
    expect(keys.json).toMatchObject({
      mode: 'cluster',
      data: [{ name: 'k', in_service: true }],
      kubectl: { revoke: expect.stringContaining('kubectl patch apikey') },
    });
    const create = await admin('/admin/v1/keys', { method: 'POST', body: JSON.stringify({ group: 'g', account: 'a' }) });
    expect(create.status).toBe(501);
    expect((await fetch(`${stack.gw.adminUrl}/admin/v1/config`)).status).toBe(401);
  });

  it('serves the consoles with a strict CSP and nothing outside their files', async () => {
    const page = await fetch(`${stack.gw.url}/console/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await page.text()).toContain('holder.js');
    expect((await fetch(`${stack.gw.url}/console/operator.js`)).status).toBe(404);
    expect((await fetch(`${stack.gw.url}/console/..%2Fpackage.json`)).status).toBe(404);
    expect(await (await fetch(`${stack.gw.adminUrl}/console/`)).text()).toContain('operator.js');
    const redirect = await fetch(`${stack.gw.url}/console`, { redirect: 'manual' });
    expect(redirect.headers.get('location')).toBe('/console/');
  });
});
