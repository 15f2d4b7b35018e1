import { fromMicro } from '../../api/snapshot/money.js';
import { formatCompileError } from '../../api/snapshot/index.js';
import { badRequest, GatewayError } from '../../kernel/errors.js';
import { createKeyManifest, listKeyManifests, revokeKeyManifest } from '../config/key-manifests.js';
import { readJson } from '../http/body.js';
import type { RequestContext, Route } from '../http/context.js';
import type { Feature, GatewayDeps } from '../http/deps.js';
import { sendJson } from '../http/send.js';
import { parseSummaryQuery, usageSummary } from './aggregates.js';
import { consoleRoutes } from './assets.js';

/**
 * The two consoles and the endpoints behind them that the older admin API lacks: usage over
 * time, the account list, the config in service, backends, the webhook outbox and, standalone,
 * key creation and revocation (ApiKey manifests in the watched config folders).
 */
const SHARED_FILES = ['style.css', 'common.js', 'chart.js'];
const LIMIT_MAX = 500;

function limitOf(ctx: RequestContext, fallback = 100): number {
  const v = ctx.query.get('limit');
  if (v === null || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > LIMIT_MAX) throw badRequest(`limit must be an integer from 1 to ${LIMIT_MAX}`, 'limit');
  return n;
}

const kubectlHelp = {
  create:
    "kubectl apply -f - <<'EOF'\napiVersion: tollgate.dev/v1alpha1\nkind: ApiKey\nmetadata: {name: NAME, namespace: NAMESPACE}\nspec: {group: GROUP, account: ACCOUNT}\nEOF\n# the operator mints the key into the Secret named in status.secretName:\nkubectl get apikey NAME -n NAMESPACE -o jsonpath='{.status.secretName}' | xargs -I{} kubectl get secret {} -n NAMESPACE -o jsonpath='{.data.apiKey}' | base64 -d",
  revoke: 'kubectl patch apikey NAME -n NAMESPACE --type merge -p \'{"spec":{"revoked":true}}\'',
};

export function consoleFeature(deps: GatewayDeps): Feature & { adminRoutes: Route[] } {
  const { store } = deps;
  // Reads of the books first let this replica's journaled charges reach them (read-your-writes).
  const current = () => deps.billing.booksCurrent?.();
  const config = (ctx: RequestContext) => {
    const c = deps.config();
    if (!c) throw new GatewayError('not_ready', 'the gateway has no configuration yet');
    void ctx;
    return c;
  };

  const ownSummary = async (ctx: RequestContext) => {
    for (const p of ['account', 'key']) if (ctx.query.has(p)) throw badRequest(`${p} cannot be chosen here: this endpoint sums the calling key's own usage`, p);
    const f = parseSummaryQuery(ctx.query, ['model', 'none']);
    await current();
    sendJson(ctx.res, 200, await usageSummary(store, { ...f, keyHash: ctx.key!.hash }));
  };

  const adminSummary = async (ctx: RequestContext) => {
    const f = parseSummaryQuery(ctx.query, ['model', 'key', 'account', 'none']);
    await current();
    sendJson(ctx.res, 200, await usageSummary(store, f));
  };

  const accounts = async (ctx: RequestContext) => {
    const limit = limitOf(ctx);
    const after = ctx.query.get('after') ?? '';
    await current();
    const r = await store.query<{ account: string; balance: string | bigint; held: string | bigint; updated_at: Date | string }>(
      'SELECT account, balance, held, updated_at FROM accounts WHERE account > $1 ORDER BY account LIMIT $2',
      [after, limit + 1],
    );
    const rows = r.rows.slice(0, limit);
    sendJson(ctx.res, 200, {
      data: rows.map((a) => {
        const balance = BigInt(a.balance);
        const held = BigInt(a.held);
        return {
          account: a.account,
          balance: fromMicro(balance),
          held: fromMicro(held),
          available: fromMicro(balance - held),
          updated_at: new Date(a.updated_at).toISOString(),
        };
      }),
      next_after: r.rows.length > limit ? rows.at(-1)!.account : null,
    });
  };

  const configView = (ctx: RequestContext) => {
    const c = config(ctx);
    const keysByGroup = new Map<string, number>();
    for (const k of c.keys.values()) keysByGroup.set(k.group, (keysByGroup.get(k.group) ?? 0) + 1);
    sendJson(ctx.res, 200, {
      version: c.version,
      mode: deps.options.keyManifests ? 'standalone' : 'cluster',
      models: [...c.models.values()]
        .sort((a, b) => a.model.localeCompare(b.model))
        .map((m) => ({ model: m.model, type: m.type, backends: m.backends.length, source: m.source, capabilities: m.capabilities })),
      groups: [...c.groups.values()]
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((g) => ({ name: g.name, models: [...g.entries.keys()].sort(), cc_only: g.ccOnly, rate_limits: g.rateLimits, keys: keysByGroup.get(g.name) ?? 0 })),
      keys: [...c.keys.values()].map((k) => ({ name: k.name, group: k.group, account: k.account })).sort((a, b) => a.name.localeCompare(b.name)),
      left_out: (deps.configProblems?.() ?? []).map((e) => ({
        kind: e.kind,
        name: e.name,
        source: e.source ?? null,
        field: e.field,
        message: formatCompileError(e),
      })),
    });
  };

  const backends = (ctx: RequestContext) => {
    const c = config(ctx);
    const now = performance.now();
    sendJson(ctx.res, 200, {
      data: [...c.models.values()]
        .sort((a, b) => a.model.localeCompare(b.model))
        .flatMap((m) =>
          m.backends.map((b) => ({
            model: m.model,
            type: m.type,
            provider: b.provider,
            base_url: b.baseURL,
            upstream_model: b.model,
            priority: b.priority,
            weight: b.weight,
            cooling_down: deps.cooldowns.isCooling(b, now),
          })),
        ),
    });
  };

  const outbox = async (ctx: RequestContext) => {
    const limit = limitOf(ctx, 50);
    const status = ctx.query.get('status');
    if (status && !['pending', 'delivered', 'failed'].includes(status)) throw badRequest('status must be pending, delivered or failed', 'status');
    const r = await store.query<Record<string, unknown>>(
      `SELECT d.id, d.task_id, d.url, d.status, d.attempts, d.next_attempt_at, d.last_error, d.created_at, d.finished_at,
              COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'started_at', a.started_at, 'duration_ms', a.duration_ms, 'status_code', a.status_code, 'error', a.error) ORDER BY a.attempt)
                          FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]'::json) AS attempt_log
         FROM webhook_deliveries d ${status ? 'WHERE d.status = $2' : ''} ORDER BY d.created_at DESC LIMIT $1`,
      status ? [limit, status] : [limit],
    );
    const iso = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string).toISOString());
    sendJson(ctx.res, 200, {
      data: r.rows.map((d) => ({
        id: d.id,
        task_id: d.task_id,
        url: d.url,
        status: d.status,
        attempts: Number(d.attempts),
        next_attempt_at: iso(d.next_attempt_at),
        last_error: d.last_error ?? null,
        created_at: iso(d.created_at),
        finished_at: iso(d.finished_at),
        attempt_log: typeof d.attempt_log === 'string' ? (JSON.parse(d.attempt_log) as unknown) : d.attempt_log,
      })),
    });
  };

  const keys = async (ctx: RequestContext) => {
    const km = deps.options.keyManifests;
    const c = deps.config();
    const live = new Set(c ? [...c.keys.values()].map((k) => k.name) : []);
    if (!km) {
      sendJson(ctx.res, 200, {
        mode: 'cluster',
        data: c ? [...c.keys.values()].map((k) => ({ name: k.name, group: k.group, account: k.account, in_service: true })) : [],
        kubectl: kubectlHelp,
      });
      return;
    }
    const manifests = await listKeyManifests(km.dirs);
    sendJson(ctx.res, 200, {
      mode: 'standalone',
      write_dir: km.writeDir,
      data: manifests.map((m) => ({
        name: m.name,
        group: m.group,
        account: m.account,
        revoked: m.revoked,
        expires_at: m.expiresAt,
        spend_limit: m.spendLimit,
        file: m.file,
        in_service: live.has(m.name),
      })),
    });
  };

  const standalone = () => {
    const km = deps.options.keyManifests;
    if (!km)
      throw new GatewayError(
        'not_implemented',
        'keys are Kubernetes resources in a cluster: create and revoke them with kubectl (GET /admin/v1/keys shows how)',
      );
    return km;
  };

  const createKey = async (ctx: RequestContext) => {
    const km = standalone();
    const { json } = await readJson(ctx, { storable: true });
    const str = (k: string) => {
      const v = json[k];
      if (v === undefined || v === null || v === '') return undefined;
      if (typeof v !== 'string') throw badRequest(`${k} must be a string`, k);
      return v;
    };
    for (const k of Object.keys(json))
      if (!['name', 'group', 'account', 'spend_limit', 'expires_at'].includes(k)) throw badRequest(`unknown field "${k.slice(0, 50)}"`, k);
    const group = str('group');
    const account = str('account');
    if (!group) throw badRequest('group is required', 'group');
    if (!account) throw badRequest('account is required', 'account');
    if (!config(ctx).groups.has(group)) throw badRequest(`no group "${group}" in the config in service`, 'group');
    const name = str('name');
    const spendLimit = str('spend_limit');
    const expiresAt = str('expires_at');
    const made = await createKeyManifest(km.dirs, km.writeDir, {
      group,
      account,
      ...(name ? { name } : {}),
      ...(spendLimit ? { spendLimit } : {}),
      ...(expiresAt ? { expiresAt } : {}),
    });
    ctx.log.info('api key created', { name: made.manifest.name, group, account, file: made.manifest.file });
    sendJson(ctx.res, 201, { key: made.key, name: made.manifest.name, group, account, file: made.manifest.file, manifest: made.yaml });
  };

  const revokeKey = async (ctx: RequestContext) => {
    const km = standalone();
    const { manifest, changed } = await revokeKeyManifest(km.dirs, ctx.params.name ?? '');
    ctx.log.info('api key revoked', { name: manifest.name, file: manifest.file, changed });
    sendJson(ctx.res, 200, { name: manifest.name, revoked: true, file: manifest.file, changed });
  };

  const admin = (method: Route['method'], path: string, handler: Route['handler']): Route => ({
    method,
    path,
    name: path,
    shape: 'openai',
    auth: 'admin',
    handler,
  });

  return {
    routes: [
      { method: 'GET', path: '/v1/usage/summary', shape: 'openai', auth: 'key', ccOnlyAware: true, handler: ownSummary },
      ...consoleRoutes('holder.html', [...SHARED_FILES, 'holder.js']),
    ],
    adminRoutes: [
      admin('GET', '/admin/v1/usage/summary', adminSummary),
      admin('GET', '/admin/v1/accounts', accounts),
      admin('GET', '/admin/v1/config', configView),
      admin('GET', '/admin/v1/backends', backends),
      admin('GET', '/admin/v1/webhooks', outbox),
      admin('GET', '/admin/v1/keys', keys),
      admin('POST', '/admin/v1/keys', createKey),
      admin('POST', '/admin/v1/keys/:name/revoke', revokeKey),
      ...consoleRoutes('operator.html', [...SHARED_FILES, 'operator.js']),
    ],
  };
}
