import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountState, credit, verifyLedger } from '../../proxy/billing/index.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { until } from '../billing/support.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { serveChild, serveTargets, writeManifests, type ServeTarget } from '../support/serve-child.js';
import { imageRoute, startReceiver } from '../tasks/support.js';

/**
 * Chaos, bounded: a gateway killed with SIGKILL at random moments under mixed chat (JSON and
 * streams) and image-task load, restarted each time, three times over. Afterwards, on both
 * stores: nothing held, the ledger consistent, balance = grants - chat usage - task charges,
 * every chat answer a client saw whole charged exactly once, every accepted task settled or
 * refunded exactly once, and every finished task's webhook delivered.
 */
const KEY = 'sk-service-chaos';
const ADMIN = 'chaos-admin';
const ENV = {
  TOLLGATE_BILLING_LEASE_SECONDS: '1.5',
  TOLLGATE_BILLING_SWEEP_SECONDS: '0.3',
  TOLLGATE_TASK_LEASE_SECONDS: '1.5',
  TOLLGATE_TASK_POLL_SECONDS: '0.05',
  TOLLGATE_TASK_RETRY_SECONDS: '0.05',
  TOLLGATE_WEBHOOK_RETRY_SCHEDULE: '0.1,0.1,0.1,0.2,0.5,1',
  TOLLGATE_WEBHOOK_TIMEOUT_SECONDS: '1',
  TOLLGATE_LOG_LEVEL: 'info',
};
const GRANT = 1_000_000_000n;
const ROUNDS = 3;

let sim: Simulator;
let hook: Awaited<ReturnType<typeof startReceiver>>;
let configDir: string;
beforeAll(async () => {
  sim = await startSimulator();
  hook = await startReceiver();
  configDir = await writeManifests(
    [
      chatRoute('m', `${sim.url}/v1`, { pricing: { inputPerMillion: '1', outputPerMillion: '2' } }),
      imageRoute('img', 'openai', `${sim.url}/v1`, { model: 'image-sim' }),
      group('g', ['m', 'img']),
      apiKey('k', KEY, 'g', { account: 'acct' }),
    ],
    'tollgate-chaos-config-',
  );
});
afterAll(async () => {
  await hook?.close();
  await sim?.close();
  if (configDir) await rm(configDir, { recursive: true, force: true });
});

interface Load {
  /** Request ids of chat answers the client received whole. */
  complete: string[];
  /** Ids of accepted image tasks. */
  tasks: string[];
}

/** Mixed load until `stop` resolves: chat JSON and streams, image tasks with a webhook. */
async function load(url: string, round: number, stop: Promise<void>, out: Load): Promise<void> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  let n = 0;
  const worker = async (kind: 'json' | 'stream' | 'task') => {
    while (!stopped) {
      const id = `chaos-${round}-${kind}-${++n}`;
      const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': id };
      try {
        if (kind === 'task') {
          const r = await fetch(`${url}/v1/images/generations`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ model: 'img', prompt: `[sim:slow=200] chaos ${id}`, webhook_url: hook.url, webhook_secret: 'whsec-chaos' }),
          });
          if (r.status === 200) out.tasks.push(((await r.json()) as { id: string }).id);
          continue;
        }
        const stream = kind === 'stream';
        const r = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: `[sim:tokens=40] ${id}` }] }),
        });
        const text = await r.text();
        // Whole: a JSON body that parses, or a stream that reached [DONE].
        const whole = r.status === 200 && (stream ? text.trimEnd().endsWith('data: [DONE]') : (JSON.parse(text) as { usage?: unknown }).usage !== undefined);
        if (whole) out.complete.push(id);
      } catch {
        // the gateway died under this request
      }
    }
  };
  await Promise.all([worker('json'), worker('json'), worker('stream'), worker('stream'), worker('task')]);
}

for (const { name, make } of serveTargets('tollgate-chaos-')) {
  describe(`chaos on ${name}`, () => {
    let t: ServeTarget;
    const children: ChildProcess[] = [];
    beforeAll(async () => {
      t = await make();
      const s = await t.open();
      await s.tx((q) => credit(q, { account: 'acct', operationId: 'chaos-grant', amount: GRANT }));
      await s.close();
    });
    afterAll(async () => {
      for (const c of children) c.kill('SIGKILL');
      await t?.dispose();
    });

    it(`${ROUNDS} SIGKILLs at random moments under mixed load: the books exact, every complete answer charged once, every task settled once, every webhook delivered`, async () => {
      const out: Load = { complete: [], tasks: [] };
      for (let round = 0; round < ROUNDS; round++) {
        const gw = await serveChild(t, configDir, { args: ['--admin-token', ADMIN, '--allow-loopback-urls'], env: ENV });
        children.push(gw.child);
        let release!: () => void;
        const stop = new Promise<void>((r) => (release = r));
        const running = load(gw.url, round, stop, out);
        // The first gateway dies only once it has served: the checks below need a complete answer
        // and an accepted task to mean anything, and a gateway can take more than the second of
        // the longest wait to serve its first (PGlite's first start on a loaded machine; CI once
        // saw three rounds pass without one). The others may die while still starting.
        if (round === 0)
          await until(
            async () => ({ complete: out.complete.length, tasks: out.tasks.length }),
            (n) => n.complete > 0 && n.tasks > 0,
            60_000,
            'a first complete answer and task',
          );
        await new Promise((r) => setTimeout(r, 300 + Math.floor(Math.random() * 700)));
        release();
        gw.child.kill('SIGKILL');
        await gw.exited;
        await running;
      }
      // A last gateway: it releases the dead leases, resumes the tasks and delivers their webhooks.
      const last = await serveChild(t, configDir, { args: ['--admin-token', ADMIN, '--allow-loopback-urls'], env: ENV });
      children.push(last.child);
      const admin = (path: string) =>
        fetch(`${last.adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.json() as Promise<Record<string, unknown>>);
      await until(
        () => admin('/admin/v1/accounts/acct'),
        (a) => a.held === '0.000000',
        30_000,
        'every lease and task hold to be resolved',
      );
      // Every finished task's webhook arrives (at least once: a crash after the receiver's 2xx repeats it).
      const hooked = () => new Set(hook.received.map((r) => (JSON.parse(r.body.toString()) as { id: string }).id));
      await until(
        async () => hooked(),
        (got) => out.tasks.every((id) => got.has(id)),
        30_000,
        'every webhook',
      );
      last.child.kill('SIGTERM');
      expect(await last.exited).toBe(0);

      const store = await t.open();
      try {
        expect(out.complete.length).toBeGreaterThan(0);
        expect(out.tasks.length).toBeGreaterThan(0);
        expect(await verifyLedger(store)).toEqual([]);
        const state = await accountState(store, 'acct');
        expect(state.held).toBe(0n);
        const usage = await store.query<{ request_id: string; n: string; credits: string }>(
          "SELECT request_id, COUNT(*)::text AS n, SUM(credits)::text AS credits FROM usage_records WHERE account = 'acct' AND kind = 'chat' GROUP BY request_id",
        );
        const charged = new Map(usage.rows.map((r) => [r.request_id, Number(r.n)]));
        for (const id of out.complete) expect(charged.get(id), id).toBe(1);
        for (const [id, n] of charged) expect(n, id).toBe(1);
        const tasks = await store.query<{ id: string; status: string; charged: string | null }>(
          "SELECT id, status, charged_micro::text AS charged FROM tasks WHERE key_hash IS NOT NULL AND status IN ('queued', 'processing', 'succeeded', 'failed', 'cancelled')",
        );
        const byId = new Map(tasks.rows.map((r) => [r.id, r]));
        for (const id of out.tasks) expect(['succeeded', 'failed'], id).toContain(byId.get(id)?.status);
        const chatCredits = usage.rows.reduce((a, r) => a + BigInt(r.credits), 0n);
        const taskCredits = tasks.rows.reduce((a, r) => a + (r.status === 'succeeded' ? BigInt(r.charged ?? '0') : 0n), 0n);
        expect(state.balance).toBe(GRANT - chatCredits - taskCredits);
        // Every ended task has one usage record, and those records add up to the tasks' charges.
        const taskUsage = await store.query<{ task_id: string; n: number; credits: string }>(
          "SELECT task_id, COUNT(*)::int AS n, SUM(credits)::text AS credits FROM usage_records WHERE account = 'acct' AND kind <> 'chat' GROUP BY task_id",
        );
        const recorded = new Map(taskUsage.rows.map((r) => [r.task_id, r.n]));
        for (const id of out.tasks) expect(recorded.get(id), id).toBe(1);
        expect(taskUsage.rows.reduce((a, r) => a + BigInt(r.credits), 0n)).toBe(taskCredits);
      } finally {
        await store.close();
      }
    }, 240_000);
  });
}
