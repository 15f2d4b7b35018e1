import { randomBytes } from 'node:crypto';
import { parseFlags, UsageError } from '../args.js';
import type { Command } from '../command.js';
import { readSettingsOrExit } from '../settings.js';

const DEFAULT_ADMIN_URL = 'http://127.0.0.1:9090';
const QUICKSTART_TOKEN = 'quickstart-admin';

interface Common {
  url: string;
  token: string;
}

async function call(c: Common, method: 'GET' | 'POST', path: string, body?: unknown): Promise<Record<string, unknown>> {
  let r: Response;
  try {
    r = await fetch(`${c.url.replace(/\/+$/, '')}${path}`, {
      method,
      headers: { authorization: `Bearer ${c.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
  } catch (err) {
    throw new Error(`cannot reach the admin API at ${c.url}: ${(err as Error).message}`);
  }
  const text = await r.text();
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new Error(`admin API answered ${r.status} with a body that is not JSON`);
  }
  if (!r.ok) {
    const e = json.error as { message?: string } | undefined;
    throw new Error(`admin API answered ${r.status}: ${e?.message ?? text.slice(0, 200)}`);
  }
  return json;
}

const enc = encodeURIComponent;

export const command: Command = {
  summary: 'grant credits, read an account, list usage (through the admin API)',
  usage: `Usage: tollgate credits grant ACCOUNT CREDITS [--idempotency-key K] [--note TEXT]
       tollgate credits balance ACCOUNT
       tollgate credits usage [--account A] [--key NAME] [--model M] [--kind chat|image|video] [--since T] [--until T] [--limit N] [--cursor C] [--json]

  CREDITS is a decimal number of credits, e.g. 10.5 (at most 6 places).
  --idempotency-key K   a retried grant with the same key changes nothing (default: a new random key)
  --since/--until T     RFC 3339 time or epoch seconds
  --admin-url URL       the gateway's admin port (default ${DEFAULT_ADMIN_URL})
  --admin-token T       admin token (default: env TOLLGATE_ADMIN_TOKEN, else the quickstart's)

Prints JSON: the account after a grant, the account for balance, a page of usage records
(and next_cursor) for usage; without --json usage prints one line per record.`,
  async run(argv) {
    const [sub, ...rest] = argv;
    const { values, positionals } = parseFlags(
      rest,
      {
        'admin-url': { type: 'string' },
        'admin-token': { type: 'string' },
        'idempotency-key': { type: 'string' },
        note: { type: 'string' },
        account: { type: 'string' },
        key: { type: 'string' },
        model: { type: 'string' },
        kind: { type: 'string' },
        since: { type: 'string' },
        until: { type: 'string' },
        limit: { type: 'string' },
        cursor: { type: 'string' },
        json: { type: 'boolean' },
      },
      true,
    );
    const c: Common = {
      url: values['admin-url'] ?? DEFAULT_ADMIN_URL,
      token: values['admin-token'] ?? readSettingsOrExit(process.env).adminToken ?? QUICKSTART_TOKEN,
    };
    const onlyFor = (allowed: string[]) => {
      for (const f of ['idempotency-key', 'note', 'account', 'key', 'model', 'kind', 'since', 'until', 'limit', 'cursor', 'json'] as const) {
        if (values[f] !== undefined && !allowed.includes(f)) throw new UsageError(`--${f} does not apply to "credits ${sub}"`);
      }
    };
    if (sub === 'grant') {
      onlyFor(['idempotency-key', 'note']);
      const [account, credits, extra] = positionals;
      if (!account || !credits || extra !== undefined) throw new UsageError('usage: tollgate credits grant ACCOUNT CREDITS');
      if (!/^\d+(\.\d{1,6})?$/.test(credits)) throw new UsageError(`CREDITS must be a decimal number with at most 6 places, got "${credits}"`);
      const idempotencyKey = values['idempotency-key'] ?? `cli-${randomBytes(12).toString('hex')}`;
      const out = await call(c, 'POST', `/admin/v1/accounts/${enc(account)}/grants`, {
        credits,
        idempotency_key: idempotencyKey,
        ...(values.note ? { note: values.note } : {}),
      });
      console.log(JSON.stringify(out));
      return 0;
    }
    if (sub === 'balance') {
      onlyFor([]);
      const [account, extra] = positionals;
      if (!account || extra !== undefined) throw new UsageError('usage: tollgate credits balance ACCOUNT');
      console.log(JSON.stringify(await call(c, 'GET', `/admin/v1/accounts/${enc(account)}`)));
      return 0;
    }
    if (sub === 'usage') {
      onlyFor(['account', 'key', 'model', 'kind', 'since', 'until', 'limit', 'cursor', 'json']);
      if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
      const q = new URLSearchParams();
      for (const f of ['account', 'key', 'model', 'kind', 'since', 'until', 'limit', 'cursor'] as const) if (values[f] !== undefined) q.set(f, values[f]);
      const out = await call(c, 'GET', `/admin/v1/usage${q.size ? `?${q.toString()}` : ''}`);
      if (values.json) {
        console.log(JSON.stringify(out));
        return 0;
      }
      for (const r of out.data as Record<string, unknown>[]) {
        console.log(
          [
            r.created_at,
            r.account,
            r.key,
            r.model,
            r.status,
            // A task's record: what it was charged for (images, seconds) or refunded, and its id.
            ...(r.kind === 'image' || r.kind === 'video'
              ? [
                  r.kind === 'image' ? `images=${String(r.images)}` : `seconds=${String(r.seconds)}`,
                  `credits=${String(r.credits)}`,
                  `refunded=${String(r.refunded_credits)}`,
                  r.task_id,
                ]
              : [`in=${String(r.input_tokens)}`, `out=${String(r.output_tokens)}`, `credits=${String(r.credits)}`, r.usage, r.request_id]),
          ].join('  '),
        );
      }
      if (typeof out.next_cursor === 'string') console.log(`# more: --cursor ${out.next_cursor}`);
      return 0;
    }
    throw new UsageError(sub ? `unknown subcommand "${sub}" (expected grant, balance or usage)` : 'missing subcommand (expected grant, balance or usage)');
  },
};
