import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GatewayConfig } from '../../api/snapshot/index.js';
import { MemoryCounter, RateLimiter, RedisCounter } from '../auth/rate-limit.js';
import type { Billing } from '../billing/index.js';
import { RuntimeConfig } from '../config/runtime.js';
import type { ConfigSource } from '../config/source.js';
import { createMetrics, type GatewayMetrics } from '../metrics/index.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT_MS } from '../http/body.js';
import type { Feature, GatewayDeps, GatewayOptions } from '../http/deps.js';
import { createHandler } from './pipeline.js';
import { GatewayResponse } from './response.js';
import { HAND_OFF_REASONS, installLeanFront } from './lean.js';
import { Telemetry } from '../metrics/telemetry.js';
import { backendStates, observedBilling, startLedgerCheck } from './observe.js';
import { sendError } from './render.js';
import { GatewayError } from '../../kernel/errors.js';
import { createLogger, type Logger } from '../../kernel/log.js';
import { readSettings, type Settings } from '../../kernel/settings.js';
import { sendJson } from '../http/send.js';
import type { Route } from '../http/context.js';
import { Cooldowns, createUpstreamAgent } from '../upstreams/index.js';
import { openStore, type Store } from '../store/index.js';

export type FeatureFactory = (deps: GatewayDeps) => Feature & { adminRoutes?: Route[] };

export interface StartOptions {
  source: ConfigSource;
  /** An open store; else one is opened from databaseUrl / dataDir (PGlite in memory when neither). */
  store?: Store;
  databaseUrl?: string;
  dataDir?: string;
  host?: string;
  /** 0 = ephemeral (tests). */
  port?: number;
  adminPort?: number;
  adminToken?: string;
  /** Shares rate-limit counters between replicas; per-replica counters when absent. */
  redisUrl?: string;
  bodyLimitBytes?: number;
  /** How long a request body may take to arrive (408 past it). */
  bodyTimeoutMs?: number;
  /** How long in-flight requests may run after SIGTERM/close() before connections are cut. */
  shutdownGraceMs?: number;
  log?: Logger;
  /** The process's settings (kernel/settings.ts); none from the environment when absent (tests). */
  settings?: Settings;
  billing: (deps: Omit<GatewayDeps, 'billing'>) => Billing;
  features: FeatureFactory[];
  options?: Partial<GatewayOptions>;
}

export interface Gateway {
  url: string;
  adminUrl: string;
  deps: GatewayDeps;
  ready(): boolean;
  close(): Promise<void>;
}

/** Opens the store, mounts the features on the API and admin ports, and starts background work. */
export async function startGateway(opts: StartOptions): Promise<Gateway> {
  const log = opts.log ?? createLogger({ component: 'gateway' });
  const host = opts.host ?? '127.0.0.1';
  const bodyLimit = opts.bodyLimitBytes ?? DEFAULT_BODY_LIMIT;
  const bodyTimeoutMs = opts.bodyTimeoutMs ?? opts.settings?.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
  const ownStore = !opts.store;
  const store = opts.store ?? (await openStore({ databaseUrl: opts.databaseUrl, dataDir: opts.dataDir }));
  const metrics = createMetrics();

  let runtime: RuntimeConfig | undefined;
  const swap = (c: GatewayConfig) => {
    runtime = new RuntimeConfig(c);
    metrics.config.reset();
    metrics.config.set({ version: c.version }, 1);
    metrics.configSwaps.inc();
  };
  opts.source.onUpdate(swap);
  opts.source.onReject?.(() => metrics.configRejections.inc());
  try {
    await opts.source.start();
  } catch (err) {
    if (ownStore) await store.close().catch(() => {});
    throw err;
  }
  const initial = opts.source.current();
  if (initial && !runtime) swap(initial);

  const settings = opts.settings ?? readSettings({});
  const adminToken = opts.adminToken ?? settings.adminToken ?? randomBytes(24).toString('base64url');
  const options: GatewayOptions = {
    publicBaseURL: '',
    allowLoopbackURLs: false,
    allowPrivateURLs: false,
    workerIntervalMs: 500,
    adminToken,
    ...(opts.dataDir ? { dataDir: opts.dataDir } : {}),
    ...opts.options,
  };
  const limiter = new RateLimiter(
    // ioredis and the tracing SDK load only when they are configured (memory of a gateway without them).
    opts.redisUrl ? new RedisCounter(new (await import('ioredis')).Redis(opts.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2 })) : new MemoryCounter(),
  );
  const cooldowns = new Cooldowns();
  const obs = settings.observability;
  const tracing = obs.otlpTracesEndpoint
    ? new (await import('../metrics/tracing.js')).Tracing({ endpoint: obs.otlpTracesEndpoint, serviceName: obs.serviceName, batchDelayMs: obs.traceBatchMs })
    : undefined;
  const telemetry = new Telemetry(
    metrics.registry,
    log,
    backendStates(() => runtime, cooldowns),
    tracing,
  );
  const base = {
    store,
    log,
    registry: metrics.registry,
    telemetry,
    config: () => runtime,
    options,
    cooldowns,
    limiter,
    settings,
    upstreamAgent: createUpstreamAgent(),
    configProblems: () => opts.source.problems?.() ?? [],
  };
  let deps: GatewayDeps;
  let features: ReturnType<FeatureFactory>[];
  try {
    // Opening billing opens its journal, which another live process may hold.
    deps = { ...base, billing: observedBilling(opts.billing(base)) };
    const d = deps;
    features = opts.features.map((f) => f(d));
  } catch (err) {
    // Nothing listens yet: give back what was taken, so the caller can exit.
    await opts.source.stop().catch(() => {});
    await limiter.close().catch(() => {});
    await base.upstreamAgent.destroy().catch(() => {});
    if (ownStore) await store.close().catch(() => {});
    throw err;
  }
  const { billing } = deps;

  const apiRoutes: Route[] = [
    // Claude Code sends HEAD / as a warm-up, without a key.
    { method: 'GET', path: '/', shape: 'openai', auth: 'none', handler: (ctx) => sendJson(ctx.res, 200, { name: 'tollgate' }) },
    ...features.flatMap((f) => f.routes),
  ];
  const adminRoutes: Route[] = [
    { method: 'GET', path: '/healthz', shape: 'openai', auth: 'none', handler: (ctx) => sendJson(ctx.res, 200, { status: 'ok' }) },
    {
      method: 'GET',
      path: '/readyz',
      shape: 'openai',
      auth: 'none',
      handler: (ctx) =>
        runtime && !closing
          ? sendJson(ctx.res, 200, { status: 'ready', configVersion: runtime.version })
          : sendJson(ctx.res, 503, { status: closing ? 'shutting down' : 'no configuration yet' }),
    },
    {
      method: 'GET',
      path: '/metrics',
      shape: 'openai',
      auth: 'none',
      handler: async (ctx) => {
        const body = await metrics.registry.metrics();
        ctx.res.writeHead(200, { 'content-type': metrics.registry.contentType });
        ctx.res.end(body);
      },
    },
    ...features.flatMap((f) => f.adminRoutes ?? []),
  ];

  // The API admits requests only once every port is bound and every feature started.
  let open = false;
  const handleApi = createHandler({ routes: apiRoutes, config: () => runtime, log, metrics, telemetry, limiter, bodyLimit, bodyTimeoutMs });
  const api = createServer({ ServerResponse: GatewayResponse }, (req, res) => {
    if (open) return handleApi(req, res);
    req.resume();
    sendError(res, new GatewayError('not_ready', 'the gateway is starting; retry in a moment', { retryAfterSeconds: 1 }), 'openai');
  });
  const admin = createServer(
    { ServerResponse: GatewayResponse },
    createHandler({ routes: adminRoutes, config: () => runtime, log, adminToken, bodyLimit, bodyTimeoutMs }),
  );
  // Longer than common load balancers' idle timeouts, so they close first.
  api.keepAliveTimeout = 65_000;
  const lean = settings.httpFront === 'lean' ? leanFront(api, apiRoutes, metrics) : undefined;
  const inflight = trackInflight(api);
  const started: typeof features = [];
  let closing = false;
  let closed: Promise<void> | undefined;
  // Stopped by close(), also when the start fails below.
  const ledgerCheck = startLedgerCheck(store, metrics.registry, log, settings.observability.ledgerCheckMs);
  const close = () =>
    (closed ??= (async () => {
      closing = true;
      api.close();
      api.closeIdleConnections();
      lean?.closeIdle();
      await inflight.drain(opts.shutdownGraceMs ?? 30_000);
      api.closeAllConnections();
      lean?.closeAll();
      await ledgerCheck.stop();
      for (const f of started) await f.stop?.().catch((err: Error) => log.error('feature stop failed', { error: err.message }));
      await billing.close().catch((err: Error) => log.error('billing close failed', { error: err.message }));
      await opts.source.stop();
      await limiter.close();
      // Streams of features that stopped are gone; what is left of the pools is idle.
      await base.upstreamAgent.destroy().catch(() => {});
      admin.close();
      admin.closeAllConnections();
      if (ownStore) await store.close();
      await tracing?.shutdown().catch((err: Error) => log.warn('trace export failed at shutdown', { error: err.message }));
      log.info('gateway stopped');
    })());

  // All or nothing: a port that cannot be bound or a feature that cannot start releases
  // everything taken so far, and the caller exits (no half-started gateway keeps serving).
  try {
    await listen(admin, opts.adminPort ?? 9090, host);
    await listen(api, opts.port ?? 8080, host);
    for (const f of features) {
      await f.start?.();
      started.push(f);
    }
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
  open = true;

  const url = `http://${host}:${(api.address() as AddressInfo).port}`;
  const adminUrl = `http://${host}:${(admin.address() as AddressInfo).port}`;
  if (!options.publicBaseURL) options.publicBaseURL = url;
  log.info('gateway listening', { api: url, admin: adminUrl, store: store.kind, configVersion: runtime?.version ?? null });

  return { url, adminUrl, deps, ready: () => Boolean(runtime) && !closing, close };
}

/** Feeds settled token counts to tokensPerMinute without the chat path knowing about limits. */
function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The lean front on the API server, for its lean routes, counting its connections and hand-offs. */
function leanFront(api: Server, routes: Route[], metrics: GatewayMetrics) {
  // Every reason from zero, so a rate over it exists before the first hand-off.
  for (const reason of HAND_OFF_REASONS) metrics.frontHandoffs.inc({ reason }, 0);
  return installLeanFront(api, {
    paths: new Set(routes.filter((r) => r.lean && r.method === 'POST').map((r) => r.path)),
    onConnection: () => metrics.frontConnections.inc(),
    onHandOff: (reason) => metrics.frontHandoffs.inc({ reason }),
  });
}

/** Counts requests in flight so shutdown can wait for them, up to a deadline. */
function trackInflight(server: Server) {
  let active = 0;
  let onIdle: (() => void) | undefined;
  server.on('request', (_req, res) => {
    active++;
    res.once('close', () => {
      active--;
      if (active === 0) onIdle?.();
    });
  });
  return {
    drain: (graceMs: number) =>
      new Promise<void>((resolve) => {
        if (active === 0) return resolve();
        const timer = setTimeout(resolve, graceMs);
        onIdle = () => {
          clearTimeout(timer);
          resolve();
        };
      }),
  };
}
