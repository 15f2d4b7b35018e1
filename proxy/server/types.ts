import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CompiledKey } from '../../api/snapshot/index.js';
import type { RuntimeConfig, RuntimeGroup } from '../config/runtime.js';
import type { Logger } from './log.js';
import type { ErrorShape } from './render.js';

/** The caller, once its key is verified. */
export interface AuthedKey {
  /** Lowercase hex sha256 of the key: the key's identity in usage rows and task ownership. */
  hash: string;
  record: CompiledKey;
  /** The ApiKey resource name: what logs and usage show. */
  name: string;
  account: string;
  group: RuntimeGroup;
  spendLimitMicro?: bigint;
}

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  method: string;
  /** Path without the query string. */
  path: string;
  query: URLSearchParams;
  /** Path parameters from the route pattern (":id"). */
  params: Record<string, string>;
  /** process.hrtime.bigint() when the request arrived. */
  startedAt: bigint;
  /** The config in service when the request arrived; stable for the whole request. */
  config: RuntimeConfig;
  /** Set on routes with auth: 'key'. */
  key?: AuthedKey;
  /** Aborts when the client goes away before the response is finished. */
  signal: AbortSignal;
  log: Logger;
  /** The error shape of this route (may depend on headers, e.g. /v1/models). */
  shape: ErrorShape;
}

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'HEAD';
  /** Exact path or a pattern with ":name" segments, e.g. /v1/images/generations/:id */
  path: string;
  /** Stable label for metrics (never a raw path with ids). Defaults to path. */
  name?: string;
  /** Error shape; a function decides per request (e.g. by anthropic-version). */
  shape: ErrorShape | ((req: IncomingMessage) => ErrorShape);
  /** key: Bearer sk-service- key required; admin: admin token; none: open. */
  auth: 'key' | 'admin' | 'none';
  /**
   * The handler serves keys of ccOnly groups and runs the Claude Code check itself. Every other
   * key route refuses them with 403 before its handler runs, so a new endpoint is closed to
   * restricted keys unless it opts in.
   */
  ccOnlyAware?: true;
  handler(ctx: RequestContext): Promise<void>;
}
