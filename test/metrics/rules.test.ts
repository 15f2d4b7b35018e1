import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const RULES = join(ROOT, 'charts/tollgate/monitoring/rules.yaml');
const CASES = join(import.meta.dirname, 'alerts.promtool.yaml');

describe('alert rules (promtool)', () => {
  it('promtool check rules accepts the chart rules', async () => {
    const { stdout } = await run('promtool', ['check', 'rules', RULES]);
    expect(stdout).toMatch(/SUCCESS: 10 rules found/);
  });

  it('promtool test rules: every alert fires on its case and stays quiet on the others', async () => {
    const r = await run('promtool', ['test', 'rules', CASES]).catch((err: { stdout: string; stderr: string }) => ({ stdout: err.stdout + err.stderr }));
    expect(r.stdout).toMatch(/SUCCESS/);
    const rules = parse(readFileSync(RULES, 'utf8')) as { groups: { rules: { alert: string }[] }[] };
    const cases = parse(readFileSync(CASES, 'utf8')) as { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] };
    const checks = cases.tests.flatMap((t) => t.alert_rule_test);
    for (const alert of rules.groups.flatMap((g) => g.rules.map((x) => x.alert))) {
      const mine = checks.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert} has a firing case`,
      ).toBe(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert} has a quiet case`,
      ).toBe(true);
    }
  });
});

describe('the Grafana dashboard', () => {
  interface Panel {
    id: number;
    type: string;
    title: string;
    gridPos: { x: number; y: number; w: number; h: number };
    datasource?: { uid: string };
    targets?: { expr: string; refId: string }[];
  }
  const dash = JSON.parse(readFileSync(join(ROOT, 'charts/tollgate/dashboards/tollgate.json'), 'utf8')) as { uid: string; panels: Panel[] };

  it('has unique panel ids, panels that do not overlap, and every query on the chosen data source', () => {
    const ids = dash.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const p of dash.panels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++)
        for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
          expect(cells.has(`${x},${y}`), `${p.title} overlaps another panel`).toBe(false);
          cells.add(`${x},${y}`);
        }
      if (p.type === 'row') continue;
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
    }
  });

  it('shows what the issue asks for: traffic, tokens, credits, TTFT, errors by backend, tasks, webhooks, config versions, NACKs', () => {
    const all = dash.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
    for (const metric of [
      'tollgate_requests_total',
      'gen_ai_client_token_usage_sum',
      'tollgate_credits_charged_total',
      'gen_ai_server_time_to_first_token_seconds_bucket',
      'gen_ai_server_time_per_output_token_seconds_bucket',
      'tollgate_upstream_requests_total',
      'tollgate_backend_cooling_down',
      'tollgate_tasks_open',
      'tollgate_tasks_oldest_age_seconds',
      'tollgate_webhook_oldest_pending_age_seconds',
      'tollgate_config_info',
      'tollgate_operator_nacks_total',
    ])
      expect(
        all.some((e) => e.includes(metric)),
        metric,
      ).toBe(true);
  });
});
