import { randomBytes } from 'node:crypto';
import { fromMicro, toMicro } from '../../api/snapshot/money.js';
import { readJson } from '../http/body.js';
import type { Feature, GatewayDeps } from '../http/deps.js';
import { badRequest, GatewayError } from '../../kernel/errors.js';
import { sendJson } from '../http/send.js';
import type { RequestContext, Route } from '../http/context.js';
import type { Queryable } from '../store/index.js';
import { accountState, credit, keySpent, verifyLedger } from '../billing/index.js';
import { listUsage, parseUsageQuery } from '../billing/index.js';

/**
 * Credits over HTTP. Admin port (admin token): grant credits to an account, read an account,
 * list usage records. API port (the caller's own key): GET /v1/credits and GET /v1/usage.
 */

const DECIMAL = /^\d{1,12}(\.\d{1,6})?$/;
const ACCOUNT = /^[\x21-\x7e]{1,200}$/;
const IDEMPOTENCY = /^[\x21-\x7e]{1,255}$/;

async function accountView(q: Queryable, account: string) {
  const s = await accountState(q, account);
  return { account, balance: fromMicro(s.balance), held: fromMicro(s.held), available: fromMicro(s.balance - s.held) };
}

async function accountExists(q: Queryable, account: string): Promise<boolean> {
  return (await q.query('SELECT 1 FROM accounts WHERE account = $1', [account])).rows.length > 0;
}

function accountParam(ctx: RequestContext): string {
  const account = ctx.params.account ?? '';
  if (!ACCOUNT.test(account)) throw badRequest('account must be 1 to 200 visible ASCII characters', 'account');
  return account;
}

export function billingFeature(deps: GatewayDeps): Feature & { adminRoutes: Route[] } {
  const { store } = deps;
  // Every read below first lets this replica's journaled charges reach the books (read-your-writes).
  const current = () => deps.billing.booksCurrent?.();

  const grant = async (ctx: RequestContext) => {
    const account = accountParam(ctx);
    const { json } = await readJson(ctx, { storable: true });
    const credits = json.credits;
    if (typeof credits !== 'string' || !DECIMAL.test(credits)) {
      throw badRequest('credits must be a decimal string of credits with at most 6 places, e.g. "10.5"', 'credits');
    }
    const amount = toMicro(credits);
    if (amount <= 0n) throw badRequest('credits must be more than zero', 'credits');
    const idem = json.idempotency_key;
    if (idem !== undefined && (typeof idem !== 'string' || !IDEMPOTENCY.test(idem))) {
      throw badRequest('idempotency_key must be 1 to 255 visible ASCII characters', 'idempotency_key');
    }
    for (const k of Object.keys(json)) if (k !== 'credits' && k !== 'idempotency_key' && k !== 'note') throw badRequest(`unknown field "${k.slice(0, 50)}"`, k);
    const note = typeof json.note === 'string' ? json.note.slice(0, 500) : undefined;
    const operationId = `grant:${account}:${typeof idem === 'string' ? idem : randomBytes(12).toString('hex')}`;
    const applied = await store.tx(async (q) => {
      const done = await credit(q, { account, operationId, amount, meta: { ...(note ? { note } : {}), via: 'admin' } });
      if (!done) {
        const prior = await q.query<{ delta_balance: unknown }>("SELECT delta_balance FROM ledger WHERE operation_id = $1 AND kind = 'grant'", [operationId]);
        if (BigInt(prior.rows[0]?.delta_balance as string | bigint) !== amount) {
          throw new GatewayError('conflict', `idempotency_key "${String(idem)}" was already used for a grant of another amount to this account`, {
            param: 'idempotency_key',
          });
        }
      }
      return done;
    });
    ctx.log.info('credits granted', { account, credits: fromMicro(amount), replayed: !applied });
    await current();
    sendJson(ctx.res, 200, await accountView(store, account), applied ? {} : { 'idempotent-replayed': 'true' });
  };

  const getAccount = async (ctx: RequestContext) => {
    const account = accountParam(ctx);
    await current();
    if (!(await accountExists(store, account)))
      throw new GatewayError('not_found', `no account "${account}" (an account exists once it has been granted credits)`, { param: 'account' });
    sendJson(ctx.res, 200, await accountView(store, account));
  };

  const usage = async (ctx: RequestContext) => {
    const f = parseUsageQuery(ctx.query);
    await current();
    sendJson(ctx.res, 200, await listUsage(store, f));
  };

  /** Recomputes every balance, held amount and open hold from the ledger rows (a full scan: for audits, not for probes). */
  const verify = async (ctx: RequestContext) => {
    await current();
    const violations = await verifyLedger(store);
    sendJson(ctx.res, 200, { consistent: violations.length === 0, violations });
  };

  const ownCredits = async (ctx: RequestContext) => {
    const key = ctx.key!;
    await current();
    const spent = await keySpent(store, key.hash);
    sendJson(ctx.res, 200, {
      ...(await accountView(store, key.account)),
      key: {
        name: key.name,
        group: key.group.name,
        cc_only: key.group.ccOnly,
        spend_limit: key.spendLimitMicro === undefined ? null : fromMicro(key.spendLimitMicro),
        spent: fromMicro(spent),
      },
    });
  };

  const ownUsage = async (ctx: RequestContext) => {
    for (const p of ['account', 'key'])
      if (ctx.query.has(p)) throw badRequest(`${p} cannot be chosen here: this endpoint lists the calling key's own usage`, p);
    const f = parseUsageQuery(ctx.query);
    await current();
    sendJson(ctx.res, 200, await listUsage(store, { ...f, keyHash: ctx.key!.hash }));
  };

  return {
    routes: [
      // ccOnly keys read their own balance and usage from any client: the restriction is about calling models.
      { method: 'GET', path: '/v1/credits', shape: 'openai', auth: 'key', ccOnlyAware: true, handler: ownCredits },
      { method: 'GET', path: '/v1/usage', shape: 'openai', auth: 'key', ccOnlyAware: true, handler: ownUsage },
    ],
    adminRoutes: [
      {
        method: 'POST',
        path: '/admin/v1/accounts/:account/grants',
        name: '/admin/v1/accounts/:account/grants',
        shape: 'openai',
        auth: 'admin',
        handler: grant,
      },
      { method: 'GET', path: '/admin/v1/accounts/:account', name: '/admin/v1/accounts/:account', shape: 'openai', auth: 'admin', handler: getAccount },
      { method: 'GET', path: '/admin/v1/usage', shape: 'openai', auth: 'admin', handler: usage },
      { method: 'GET', path: '/admin/v1/ledger/verify', shape: 'openai', auth: 'admin', handler: verify },
    ],
  };
}
