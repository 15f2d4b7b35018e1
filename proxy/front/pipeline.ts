import { randomUUID, timingSafeEqual, createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { authenticate } from '../auth/keys.js';
import type { RateLimiter } from '../auth/rate-limit.js';
import type { RuntimeConfig } from '../config/runtime.js';
import type { GatewayMetrics } from '../metrics/index.js';
import type { Telemetry } from '../metrics/telemetry.js';
import { badRequest, GatewayError } from '../../kernel/errors.js';
import { unstorable } from '../../kernel/storable.js';
import type { Logger } from '../../kernel/log.js';
import { sendError, type ErrorShape } from './render.js';
import type { GatewayResponse } from './response.js';
import { Router } from './router.js';
import type { RequestContext, Route } from '../http/context.js';

export interface HandlerOptions {
  routes: Route[];
  config(): RuntimeConfig | undefined;
  log: Logger;
  /** Largest request body read (413 past it). */
  bodyLimit: number;
  /** How long a request body may take to arrive (408 past it). */
  bodyTimeoutMs: number;
  metrics?: GatewayMetrics;
  /** GenAI metrics and the access log (the API port). */
  telemetry?: Telemetry;
  /** Required for auth: 'admin' routes. */
  adminToken?: string;
  /** Applies the key's group rate limits to POST routes (the metered ones). */
  limiter?: RateLimiter;
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** Paths under /v1/messages answer in Anthropic's shape even when no route matched. */
function shapeForPath(path: string): ErrorShape {
  return path.startsWith('/v1/messages') ? 'anthropic' : 'openai';
}

export function createHandler(opts: HandlerOptions): (req: IncomingMessage, res: GatewayResponse) => void {
  const router = new Router(opts.routes);
  const adminDigest = opts.adminToken ? createHash('sha256').update(opts.adminToken).digest() : undefined;

  return (req, res) => {
    const startedAt = process.hrtime.bigint();
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.requestId = requestId;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    const m = router.match(method, path);

    let routeName = 'unmatched';
    let errorCode: string | undefined;
    let ctxOf: RequestContext | undefined;
    const scope = opts.telemetry?.begin(requestId, method, req.headers);
    const controller = new AbortController();
    // One listener for the request's end: metrics, the access log, and the abort of a request
    // whose client left before its answer was finished.
    res.once('close', () => {
      const gone = !res.writableFinished;
      if (gone) controller.abort();
      const latencyNs = Number(process.hrtime.bigint() - startedAt);
      if (scope) {
        opts.telemetry!.end(scope, {
          method,
          route: routeName,
          status: res.statusCode,
          ...(errorCode ? { errorCode } : {}),
          clientGone: gone,
          ...(ctxOf?.key ? { keyName: ctxOf.key.name, group: ctxOf.key.group.name } : {}),
          latencyMs: latencyNs / 1e6,
        });
      }
      if (opts.metrics) {
        const values = [routeName, String(res.statusCode)] as const;
        opts.metrics.requests.at(values).inc();
        opts.metrics.duration.at(values).observe(latencyNs / 1e9);
      }
    });

    if (!m || 'allowed' in m) {
      // Codex's built-in OpenAI provider first asks for a WebSocket on GET /v1/responses: a 426
      // makes it fall back to POST at once, where a 404 or 405 costs it ~6 s of retries.
      const err = !m
        ? new GatewayError('not_found', `no route for ${method} ${path}`)
        : /websocket/i.test(req.headers.upgrade ?? '')
          ? new GatewayError('upgrade_required', `WebSocket mode is not served on ${path}; send the request with ${m.allowed.join(', ')} (HTTP streaming)`)
          : new GatewayError('method_not_allowed', `${method} is not allowed on ${path}; use ${m.allowed.join(', ')}`);
      if (m) res.setHeader('allow', m.allowed.join(', '));
      req.resume();
      errorCode = err.code;
      sendError(res, err, shapeForPath(path), requestId);
      return;
    }
    const { route, params } = m;
    routeName = route.name ?? route.path;
    const shape = typeof route.shape === 'function' ? route.shape(req) : route.shape;

    const fail = (err: unknown) => {
      errorCode = err instanceof GatewayError ? err.code : 'internal_error';
      if (err instanceof GatewayError) {
        sendError(res, err, shape, requestId);
        return;
      }
      opts.log.error('unhandled error', { requestId, route: routeName, error: (err as Error)?.stack ?? String(err) });
      sendError(res, new GatewayError('internal_error', `internal error (request ${requestId})`), shape, requestId);
    };

    const run = async () => {
      const config = opts.config();
      if (route.auth === 'admin') checkAdmin(req, adminDigest);
      if ((route.auth === 'key' || route.auth === 'key-after-body') && !config) throw new GatewayError('not_ready', 'the gateway has no configuration yet');
      const ctx: RequestContext = {
        req,
        res,
        bodyLimit: opts.bodyLimit,
        bodyTimeoutMs: opts.bodyTimeoutMs,
        requestId,
        method,
        path,
        query: q === -1 ? NO_QUERY : new URLSearchParams(url.slice(q + 1)),
        params,
        startedAt,
        config: config as RuntimeConfig,
        signal: controller.signal,
        log: opts.log,
        shape,
        scope,
      };
      ctxOf = ctx;
      checkStorable(ctx);
      const admitKey = async () => {
        const key = (ctx.key = authenticate(req, config!));
        if (key.group.ccOnly && !route.ccOnlyAware) {
          throw new GatewayError(
            'client_restricted',
            `this key's group "${key.group.name}" is restricted to the Claude Code client, which does not use ${route.name ?? route.path}; use a key of a regular group for other clients`,
          );
        }
        const limits = key.group.rateLimits;
        if (opts.limiter && method === 'POST' && (limits.requestsPerMinute || limits.tokensPerMinute || limits.concurrentRequests)) {
          res.once('close', await opts.limiter.admit(key.hash, limits));
        }
        return key;
      };
      if (route.auth === 'key') await admitKey();
      // The handler reads and checks the body first, as the contract orders the errors.
      else if (route.auth === 'key-after-body') ctx.admitKey = admitKey;
      // Returned, not awaited: this frame (V8 keeps all of a suspended function's locals) goes
      // now instead of living as long as the handler, a whole stream for chat.
      return route.handler(ctx);
    };
    run().catch((err: unknown) => {
      req.resume();
      fail(err);
    });
  };
}

function checkAdmin(req: IncomingMessage, digest: Buffer | undefined): void {
  const header = req.headers.authorization ?? '';
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  // Compare digests: constant time regardless of the presented token's length.
  const given = createHash('sha256')
    .update(m?.[1] ?? '')
    .digest();
  if (!digest || !m || !timingSafeEqual(given, digest)) {
    throw new GatewayError('unauthorized_admin', 'admin API: missing or wrong admin token (Authorization: Bearer <admin token>)');
  }
}

/**
 * The query of every request without one, shared: an empty URLSearchParams cost 1.4k instructions
 * per request (callgrind), and nothing writes a request's query. (A getter in the context's
 * literal, made per request, cost far more: the gateway promoted 4.4 MB per scavenge, not 19 KB.)
 */
const NO_QUERY = new URLSearchParams();

/** Path and query parameters reach lookups in the store: one it cannot hold is a 400 naming it. */
function checkStorable(ctx: RequestContext): void {
  for (const [name, value] of Object.entries(ctx.params)) {
    if (unstorable(value)) throw badRequest(`${name} contains a character that cannot be stored (NUL or an unpaired UTF-16 surrogate)`, name);
  }
  for (const [name, value] of ctx.query) {
    if (unstorable(name) || unstorable(value))
      throw badRequest(`query parameter ${JSON.stringify(name)} contains a character that cannot be stored (NUL or an unpaired UTF-16 surrogate)`, name);
  }
}
