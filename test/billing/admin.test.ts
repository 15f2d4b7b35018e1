import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { admin, ADMIN, billingStack, C, usageOf, type BillingStack } from './support.js';

/** The admin API (grants, accounts, usage), the key holder's /v1 endpoints and `tollgate credits`. */
const ALICE = 'sk-service-admin-alice';
const BOB = 'sk-service-admin-bob';

function resources(sim: string) {
  const pricing = { inputPerMillion: '1', outputPerMillion: '2' };
  return [
    chatRoute('m1', `${sim}/v1`, { pricing }),
    chatRoute('m2', `${sim}/v1`, { pricing }),
    group('g', ['m1', 'm2']),
    apiKey('alice', ALICE, 'g', { account: 'team' }),
    apiKey('bob', BOB, 'g', { account: 'team' }),
  ];
}

for (const sc of storeCases()) {
  describe(`credits admin API on ${sc.name}`, () => {
    let s: BillingStack;
    beforeAll(async () => {
      s = await billingStack(sc, resources);
    });
    afterAll(() => s?.dispose());

    it('grants credits; replaying an idempotency key changes nothing; another amount under it is 409', async () => {
      const body = JSON.stringify({ credits: '10.5', idempotency_key: 'invoice-1' });
      const first = await admin(s, '/admin/v1/accounts/team/grants', { method: 'POST', body });
      expect(first.status).toBe(200);
      expect(first.json).toEqual({ account: 'team', balance: '10.500000', held: '0.000000', available: '10.500000' });
      const again = await admin(s, '/admin/v1/accounts/team/grants', { method: 'POST', body });
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.json.balance).toBe('10.500000');
      const other = await admin(s, '/admin/v1/accounts/team/grants', { method: 'POST', body: JSON.stringify({ credits: '11', idempotency_key: 'invoice-1' }) });
      expect(other.status).toBe(409);
      expect(other.json.error).toMatchObject({ code: 'conflict', param: 'idempotency_key' });
      expect((await admin(s, '/admin/v1/accounts/team')).json).toMatchObject({ balance: '10.500000' });
    });

    it('refuses bad grants with a 400 naming the field, and the admin API without its token with 401', async () => {
      for (const [credits, param] of [
        [10.5, 'credits'],
        ['-1', 'credits'],
        ['0', 'credits'],
        ['1.1234567', 'credits'],
        ['abc', 'credits'],
      ] as const) {
        const r = await admin(s, '/admin/v1/accounts/team/grants', { method: 'POST', body: JSON.stringify({ credits }) });
        expect(r.status, String(credits)).toBe(400);
        expect(r.json.error).toMatchObject({ param });
      }
      const unknown = await admin(s, '/admin/v1/accounts/team/grants', { method: 'POST', body: JSON.stringify({ credits: '1', amount: '1' }) });
      expect(unknown.status).toBe(400);
      const noAuth = await fetch(`${s.gw.adminUrl}/admin/v1/accounts/team`);
      expect(noAuth.status).toBe(401);
      const wrong = await fetch(`${s.gw.adminUrl}/admin/v1/accounts/team`, { headers: { authorization: 'Bearer nope' } });
      expect(wrong.status).toBe(401);
      expect((await admin(s, '/admin/v1/accounts/nobody')).status).toBe(404);
      expect((await admin(s, '/admin/v1/accounts/team')).json).toMatchObject({ balance: '10.500000' });
      expect((await admin(s, '/admin/v1/ledger/verify')).json).toEqual({ consistent: true, violations: [] });
      // A balance changed behind the ledger's back is reported.
      await s.store.query("UPDATE accounts SET balance = balance + 1 WHERE account = 'team'");
      const broken = await admin(s, '/admin/v1/ledger/verify');
      expect(broken.json.consistent).toBe(false);
      expect(broken.json.violations).toEqual(['account team: balance 10500001 != rows 10500000']);
      await s.store.query("UPDATE accounts SET balance = balance - 1 WHERE account = 'team'");
    });

    it('lists usage newest first with filters and a cursor; each key holder sees only its own usage', async () => {
      const alice = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: ALICE, maxRetries: 0 });
      const bob = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: BOB, maxRetries: 0 });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const id = `usage-a-${i}-${Date.now()}`;
        ids.push(id);
        await alice.chat.completions.create(
          { model: i % 2 ? 'm2' : 'm1', messages: [{ role: 'user', content: `a${i}` }] },
          { headers: { 'x-request-id': id } },
        );
      }
      const bobId = `usage-b-${Date.now()}`;
      await bob.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'b' }] }, { headers: { 'x-request-id': bobId } });
      await usageOf(s.store, bobId);

      const all = await admin(s, '/admin/v1/usage?account=team');
      const data = all.json.data as Record<string, unknown>[];
      expect(data).toHaveLength(6);
      expect(data[0]).toMatchObject({
        request_id: bobId,
        key: 'bob',
        account: 'team',
        group: 'g',
        model: 'm1',
        protocol: 'chat-completions',
        usage: 'reported',
        status: 'ok',
      });
      expect(data[0]!.credits).toMatch(/^0\.0000\d\d$/);
      expect(JSON.stringify(all.json)).not.toContain('sk-service');

      const byKey = await admin(s, '/admin/v1/usage?key=alice&model=m1');
      expect((byKey.json.data as { request_id: string }[]).map((r) => r.request_id)).toEqual([ids[4], ids[2], ids[0]]);

      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: Awaited<ReturnType<typeof admin>> = await admin(s, `/admin/v1/usage?key=alice&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect((page.json.data as unknown[]).length).toBeLessThanOrEqual(2);
        seen.push(...(page.json.data as { request_id: string }[]).map((r) => r.request_id));
        cursor = page.json.next_cursor as string | null;
      } while (cursor);
      expect(seen).toEqual([...ids].reverse());

      const future = await admin(s, `/admin/v1/usage?since=${Math.floor(Date.now() / 1000) + 3600}`);
      expect(future.json).toEqual({ data: [], next_cursor: null });
      expect((await admin(s, '/admin/v1/usage?limit=0')).status).toBe(400);
      expect((await admin(s, '/admin/v1/usage?since=yesterday')).status).toBe(400);
      expect((await admin(s, '/admin/v1/usage?cursor=zzz')).status).toBe(400);

      const own = await fetch(`${s.gw.url}/v1/usage?limit=10`, { headers: { authorization: `Bearer ${BOB}` } });
      expect(own.status).toBe(200);
      const ownData = ((await own.json()) as { data: { request_id: string; key: string }[] }).data;
      expect(ownData.map((r) => r.request_id)).toEqual([bobId]);
      const sneaky = await fetch(`${s.gw.url}/v1/usage?key=alice`, { headers: { authorization: `Bearer ${BOB}` } });
      expect(sneaky.status).toBe(400);
      expect((await fetch(`${s.gw.url}/v1/credits`)).status).toBe(401);
      const credits = (await (await fetch(`${s.gw.url}/v1/credits`, { headers: { authorization: `Bearer ${ALICE}` } })).json()) as Record<string, unknown>;
      expect(credits).toMatchObject({ account: 'team', key: { name: 'alice', spend_limit: null } });
      expect(BigInt(String(credits.balance).replace('.', ''))).toBeLessThan(10_500_000n);
    });

    it('tollgate credits grant | balance | usage drive the same API', async () => {
      const flags = ['--admin-url', s.gw.adminUrl, '--admin-token', ADMIN];
      const g = await runCli(['credits', 'grant', 'cli-acct', '2.25', '--idempotency-key', 'cli-1', ...flags]);
      expect(g.code, g.stderr).toBe(0);
      expect(JSON.parse(g.stdout)).toEqual({ account: 'cli-acct', balance: '2.250000', held: '0.000000', available: '2.250000' });
      const again = await runCli(['credits', 'grant', 'cli-acct', '2.25', '--idempotency-key', 'cli-1', ...flags]);
      expect(JSON.parse(again.stdout).balance).toBe('2.250000');
      const b = await runCli(['credits', 'balance', 'cli-acct', ...flags]);
      expect(JSON.parse(b.stdout)).toMatchObject({ account: 'cli-acct', balance: '2.250000' });
      const u = await runCli(['credits', 'usage', '--account', 'team', '--key', 'bob', '--json', ...flags]);
      expect(u.code, u.stderr).toBe(0);
      expect((JSON.parse(u.stdout) as { data: { key: string }[] }).data.every((r) => r.key === 'bob')).toBe(true);
      const lines = await runCli(['credits', 'usage', '--key', 'alice', '--limit', '2', ...flags]);
      expect(lines.stdout.trim().split('\n')).toHaveLength(3);
      expect(lines.stdout).toContain('# more: --cursor ');
      const help = await runCli(['credits', '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('tollgate credits grant ACCOUNT CREDITS');
      expect((await runCli(['credits', 'refund', 'x'])).code).toBe(2);
      const bad = await runCli(['credits', 'grant', 'x', '1.5.5', ...flags]);
      expect(bad.code).toBe(2);
      const denied = await runCli(['credits', 'balance', 'cli-acct', '--admin-url', s.gw.adminUrl, '--admin-token', 'not-the-token-7f3c']);
      expect(denied.code).toBe(1);
      expect(denied.stderr).toContain('401');
      expect(denied.stderr).not.toContain('not-the-token-7f3c');
    }, 60_000);
  });

  // Behind a journal (PostgreSQL's default, the table; PGlite's, a directory) the books are written
  // a moment after the answers: a minute here, so only the reads themselves can have brought them.
  describe(`reads of the books behind a journal on ${sc.name}`, () => {
    let s: BillingStack;
    let dir: string | undefined;
    beforeAll(async () => {
      dir = sc.name === 'postgres' ? undefined : await mkdtemp(join(tmpdir(), 'tollgate-read-own-'));
      s = await billingStack(sc, resources, { journalFlushMs: 60_000, ...(dir ? { journalDir: dir } : {}) });
      await s.grant('team', 10n * C, 'read-own-grant');
    });
    afterAll(async () => {
      await s?.dispose();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("show a replica's answers at once: /v1/credits, /v1/usage, the summary and the admin views", async () => {
      const alice = new OpenAI({ baseURL: `${s.gw.url}/v1`, apiKey: ALICE, maxRetries: 0 });
      const ids: string[] = [];
      let cost = 0n;
      for (let i = 0; i < 3; i++) {
        const id = `read-own-${i}-${Date.now()}`;
        ids.push(id);
        const r = await alice.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: `r${i}` }] }, { headers: { 'x-request-id': id } });
        cost += BigInt(r.usage!.prompt_tokens + 2 * r.usage!.completion_tokens);
      }
      // Durable in the journal, not yet in the books.
      expect((await s.store.query('SELECT 1 FROM usage_records WHERE request_id = ANY($1)', [ids])).rows).toHaveLength(0);
      const micro = (v: unknown) => BigInt(String(v).replace('.', ''));
      const key = async (path: string) =>
        (await (await fetch(`${s.gw.url}${path}`, { headers: { authorization: `Bearer ${ALICE}` } })).json()) as Record<string, unknown>;
      const credits = await key('/v1/credits');
      expect(micro(credits.balance)).toBe(10n * C - cost);
      expect(micro((credits.key as Record<string, unknown>).spent)).toBe(cost);
      expect(((await key('/v1/usage?limit=10')).data as { request_id: string }[]).map((r) => r.request_id).sort()).toEqual([...ids].sort());
      expect((await key('/v1/usage/summary?group_by=none')).totals).toMatchObject({ requests: 3 });
      expect(micro((await admin(s, '/admin/v1/accounts/team')).json.balance)).toBe(10n * C - cost);
    });
  });
}
