import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startCli } from '../support/cli.js';

/**
 * `tollgate serve --quickstart`: the demo account is granted 1000 credits once per data folder.
 * (Its models point at the simulator's fixed port 8090, so chat is not called here; metering is
 * covered by the other billing tests.)
 */
describe('the quickstart', () => {
  let dir: string | undefined;
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const serve = (data: string) =>
    startCli(
      ['serve', '--quickstart', '--port', '0', '--admin-port', '0', '--simulator-port', '0', '--data', data],
      (l) => l.msg === 'gateway listening',
      // A quickstart child must not pick up the test PostgreSQL.
      { DATABASE_URL: '' },
      60_000,
    );

  it('grants the demo account 1000 credits once, across restarts; the CLI defaults to its admin token', async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-quickstart-'));
    const first = await serve(dir);
    try {
      const api = first.match.api as string;
      const adminUrl = first.match.admin as string;
      const credits = async () =>
        (await (await fetch(`${api}/v1/credits`, { headers: { authorization: 'Bearer sk-service-quickstart' } })).json()) as { balance: string };
      expect((await credits()).balance).toBe('1000.000000');
      // Spend some, so a second grant would show.
      const grant = await fetch(`${adminUrl}/admin/v1/accounts/demo/grants`, {
        method: 'POST',
        headers: { authorization: 'Bearer quickstart-admin', 'content-type': 'application/json' },
        body: JSON.stringify({ credits: '0.5', idempotency_key: 'qs-test' }),
      });
      expect(grant.status).toBe(200);
      const after = (await credits()).balance;
      expect(after).toBe('1000.500000');
      // The CLI's defaults are the quickstart's token; only the port differs here.
      const b = await runCli(['credits', 'balance', 'demo', '--admin-url', adminUrl], { TOLLGATE_ADMIN_TOKEN: '' });
      expect(b.code, b.stderr).toBe(0);
      expect(JSON.parse(b.stdout)).toMatchObject({ account: 'demo', balance: after });
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);

      const second = await serve(dir);
      try {
        const again = (await (
          await fetch(`${second.match.api as string}/v1/credits`, { headers: { authorization: 'Bearer sk-service-quickstart' } })
        ).json()) as { balance: string };
        expect(again.balance).toBe(after);
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    } finally {
      first.child.kill('SIGKILL');
    }
  }, 120_000);
});
