import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthedKey } from '../auth/keys.js';
import type { RuntimeConfig } from '../config/runtime.js';

export type { AuthedKey };
import type { Logger } from '../../kernel/log.js';
import type { ErrorShape } from '../ir/protocol.js';
import type { RequestScope } from '../metrics/scope.js';

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  method: string;
  /** Path without the query string. */
  path: string;
  readonly query: URLSearchParams;
  /** Path parameters from the route pattern (":id"). */
  params: Record<string, string>;
  /** process.hrtime.bigint() when the request arrived. */
  startedAt: bigint;
  /** The config in service when the request arrived; stable for the whole request. */
  config: RuntimeConfig;
  /** Set on routes with auth: 'key' (and by admitKey on 'key-after-body' routes). */
  key?: AuthedKey;
  /** On 'key-after-body' routes: checks the key (401), its client restriction and rate limits; the handler calls it once it has read the body. */
  admitKey?: () => Promise<AuthedKey>;
  /** Aborts when the client goes away before the response is finished. */
  signal: AbortSignal;
  log: Logger;
  /** Largest request body this gateway reads (413 past it). */
  bodyLimit: number;
  /** How long the whole request body may take to arrive (408 past it). */
  bodyTimeoutMs: number;
  /** The error shape of this route (may depend on headers, e.g. /v1/models). */
  shape: ErrorShape;
  /** The request's telemetry (metrics, access log, trace), when the port has telemetry. */
  scope?: RequestScope | undefined;
}

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'HEAD';
  /** Exact path or a pattern with ":name" segments, e.g. /v1/images/generations/:id */
  path: string;
  /** Stable label for metrics (never a raw path with ids). Defaults to path. */
  name?: string;
  /** Error shape; a function decides per request (e.g. by anthropic-version). */
  shape: ErrorShape | ((req: IncomingMessage) => ErrorShape);
  /**
   * key: Bearer sk-service- key required; key-after-body: the same, checked by the handler after
   * the body (the chat endpoints: the contract answers an invalid body 400 before a bad key 401);
   * admin: admin token; none: open.
   */
  auth: 'key' | 'key-after-body' | 'admin' | 'none';
  /**
   * The handler serves keys of ccOnly groups and runs the Claude Code check itself. Every other
   * key route refuses them with 403 before its handler runs, so a new endpoint is closed to
   * restricted keys unless it opts in.
   */
  ccOnlyAware?: true;
  /**
   * POST routes whose handlers use only the response members the lean front implements
   * (proxy/front/lean-response.ts): with TOLLGATE_HTTP_FRONT=lean their requests are served by it.
   */
  lean?: true;
  handler(ctx: RequestContext): void | Promise<void>;
}
