import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { OperatorMetrics, serveMetrics } from '../../operator/metrics.js';
import { billingFeature } from '../../proxy/admin/billing.js';
import { chatFeature } from '../../proxy/chat/feature.js';
import { tasksFeature } from '../../proxy/tasks/feature.js';
import { deadPort } from '../support/ports.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { FAST, imageRoute } from '../tasks/support.js';

/**
 * A real Prometheus (Debian's package; .ci/run installs it) scrapes a gateway and an operator's
 * metrics while a little traffic runs, with the chart's alert rules loaded. Every query of the
 * chart's dashboard must return data and every alert rule must evaluate.
 */
const ROOT = join(import.meta.dirname, '../..');
const RULES = join(ROOT, 'charts/tollgate/monitoring/rules.yaml');
const DASHBOARD = join(ROOT, 'charts/tollgate/dashboards/tollgate.json');
const KEY = 'sk-service-prometheus-test';

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

let stack: Stack;
let operator: { server: Server };
let receiver: Server;
let prom: ChildProcess;
let promUrl: string;
let dir: string;
let promLog = '';

async function until<T>(what: string, ms: number, fn: () => Promise<T | undefined>): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}; prometheus said:\n${promLog.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function query(expr: string): Promise<{ status: string; error?: string; data?: { result: unknown[] } }> {
  const res = await fetch(`${promUrl}/api/v1/query?${new URLSearchParams({ query: expr })}`);
  return (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
}

beforeAll(async () => {
  const dead = await deadPort();
  receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
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
      chatRoute('dead-only', `http://127.0.0.1:${dead}/v1`),
      imageRoute('img', 'openai', `${sim}/v1`),
      group('team-a', ['sim-gpt', 'sim-claude', 'multi', 'dead-only', 'img']),
      apiKey('alice', KEY, 'team-a'),
    ],
    {
      features: [chatFeature, tasksFeature(FAST), billingFeature],
      options: { allowLoopbackURLs: true, allowPrivateURLs: true, workerIntervalMs: 50 },
    },
  );
  const om = new OperatorMetrics();
  om.proxiesConnected.set(1);
  operator = await serveMetrics(om, 0, () => true, '127.0.0.1');

  dir = mkdtempSync(join(tmpdir(), 'tollgate-prom-'));
  const promPort = await deadPort();
  promUrl = `http://127.0.0.1:${promPort}`;
  writeFileSync(
    join(dir, 'prometheus.yml'),
    JSON.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [RULES],
      scrape_configs: [
        { job_name: 'tollgate-proxy', static_configs: [{ targets: [new URL(stack.gw.adminUrl).host] }] },
        { job_name: 'tollgate-operator', static_configs: [{ targets: [`127.0.0.1:${(operator.server.address() as AddressInfo).port}`] }] },
      ],
    }),
  );
  prom = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  prom.stdout!.on('data', (d: Buffer) => (promLog += d.toString()));
  prom.stderr!.on('data', (d: Buffer) => (promLog += d.toString()));
  await until('prometheus to be ready', 30_000, async () => ((await fetch(`${promUrl}/-/ready`)).ok ? true : undefined));
}, 120_000);

afterAll(async () => {
  prom?.kill('SIGTERM');
  await stack?.close();
  operator?.server.close();
  receiver?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Until both targets have been scraped more than a second after `ms` (epoch milliseconds): at 1 s intervals, twice since. */
async function scrapedAfter(ms: number): Promise<void> {
  await until('scrapes of both targets', 30_000, async () => {
    const r = await query(`timestamp(up) > ${ms / 1000 + 1}`);
    return (r.data?.result.length ?? 0) >= 2 ? true : undefined;
  });
}

async function traffic() {
  const openai = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const anthropic = new Anthropic({ baseURL: stack.gw.url, apiKey: KEY, maxRetries: 0 });
  const webhook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const stream = await openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim:tokens=20]' }], stream: true });
  for await (const _ of stream);
  await openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }], stream: false });
  await anthropic.messages.create({ model: 'sim-claude', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
  await openai.chat.completions.create({ model: 'multi', messages: [{ role: 'user', content: 'hi' }], stream: false });
  await openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: '[sim:500]' }] }).catch(() => {});
  await openai.chat.completions.create({ model: 'dead-only', messages: [{ role: 'user', content: 'hi' }] }).catch(() => {});
  await openai.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] }).catch(() => {});
  for (const prompt of ['a fox', 'forbidden [sim:fail]']) {
    await fetch(`${stack.gw.url}/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'img', prompt, size: '64x64', webhook_url: webhook, webhook_secret: 'whsec-test' }),
    });
  }
}

describe('with a real Prometheus', () => {
  it('every dashboard query returns data and every alert rule evaluates; a model whose only backend is down raises its alert', async () => {
    // Two rounds with scrapes between and after them: rates need two samples in their window.
    // Prometheus applies its targets a few seconds after it is ready, so wait for the first scrapes.
    await scrapedAfter(Date.now());
    await traffic();
    await scrapedAfter(Date.now());
    await traffic();
    await scrapedAfter(Date.now());

    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] };
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
    expect(exprs.length).toBeGreaterThan(30);
    const empty: string[] = [];
    for (const { panel, expr } of exprs) {
      const q = expr.replaceAll('$__rate_interval', '20s').replaceAll('$__range', '5m');
      const r = await query(q);
      expect(r.status, `${panel}: ${q}: ${r.error}`).toBe('success');
      if (r.data!.result.length === 0) empty.push(`${panel}: ${q}`);
    }
    expect(empty).toEqual([]);

    const rules = parse(readFileSync(RULES, 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] };
    const names = rules.groups.flatMap((g) => g.rules.map((r) => r.alert));
    for (const g of rules.groups) for (const r of g.rules) expect((await query(r.expr)).status, r.alert).toBe('success');
    const loaded = await until('the rules to be evaluated', 10_000, async () => {
      const body = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
        data: { groups: { rules: { name: string; health: string; lastError?: string; lastEvaluation: string }[] }[] };
      };
      const all = body.data.groups.flatMap((g) => g.rules);
      return all.length === names.length && all.every((r) => !r.lastEvaluation.startsWith('0001')) ? all : undefined;
    });
    expect(loaded.map((r) => r.name).sort()).toEqual([...names].sort());
    for (const r of loaded) expect(r.health, `${r.name}: ${r.lastError}`).toBe('ok');

    // dead-only's one backend cools down after each failed call: the alert is pending (it fires after 1m).
    const alerts = await until('TollgateModelAllBackendsCoolingDown', 10_000, async () => {
      const body = (await (await fetch(`${promUrl}/api/v1/alerts`)).json()) as { data: { alerts: { labels: Record<string, string>; state: string }[] } };
      const a = body.data.alerts.filter((x) => x.labels.alertname === 'TollgateModelAllBackendsCoolingDown');
      return a.length ? a : undefined;
    });
    expect(alerts.map((a) => a.labels.model)).toEqual(['dead-only']);
  }, 90_000);
});
