import { Agent, type Dispatcher } from 'undici';
import type { CompiledBackend } from './types.js';
import { OnceBody, type UpstreamBody } from './body.js';
import { watchUpstream } from '../metrics/telemetry.js';
import type { RequestScope } from '../metrics/scope.js';

/**
 * The undici Agent a gateway reaches every upstream with (one per gateway, closed with it): it
 * keeps a keep-alive Pool per origin. Timeouts are per request (the backend's timeoutMs) for the
 * response headers and for each gap between body chunks, so a long stream that keeps producing
 * never times out.
 */
export function createUpstreamAgent(): Agent {
  return new Agent({
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 300_000,
    connect: { timeout: 10_000 },
  });
}

interface Target {
  origin: string;
  /** Path of the baseURL (no trailing slash), to which the operation's path is appended. */
  basePath: string;
}
// Backends are immutable objects of one config snapshot: parse each baseURL once.
const targets = new WeakMap<CompiledBackend, Target>();
export function targetOf(backend: CompiledBackend): Target {
  let t = targets.get(backend);
  if (!t) {
    const u = new URL(backend.baseURL);
    t = { origin: u.origin, basePath: u.pathname.replace(/\/+$/, '') };
    targets.set(backend, t);
  }
  return t;
}

export interface UpstreamCall {
  backend: CompiledBackend;
  path: string;
  headers: Record<string, string>;
  body: UpstreamBody;
  signal: AbortSignal;
  /** The gateway's upstream agent. */
  dispatcher: Dispatcher;
  /** The request's telemetry, told how the call went. */
  scope?: RequestScope | undefined;
}

export type UpstreamFailure = 'timeout' | 'unavailable' | 'aborted';

export class UpstreamError extends Error {
  constructor(
    readonly kind: UpstreamFailure,
    message: string,
    readonly causeCode?: string,
  ) {
    super(message);
    this.name = 'UpstreamError';
  }
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

export function classify(err: unknown, signal?: AbortSignal): UpstreamError {
  if (err instanceof UpstreamError) return err;
  const e = err as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (signal?.aborted || e?.name === 'AbortError' || code === 'UND_ERR_ABORTED') return new UpstreamError('aborted', 'request aborted', code);
  if (code && TIMEOUT_CODES.has(code)) return new UpstreamError('timeout', e.message ?? 'timed out', code);
  return new UpstreamError('unavailable', e?.message ?? String(err), code);
}

export async function callUpstream(call: UpstreamCall): Promise<Dispatcher.ResponseData> {
  const t = targetOf(call.backend);
  const probe = watchUpstream(call.scope, call.backend, call.headers);
  // Callbacks, not an await in a try: no suspended frame of this function per call in flight.
  return call.dispatcher
    .request({
      origin: t.origin,
      path: t.basePath + call.path,
      method: 'POST',
      // undici sends an iterable chunked unless told its length.
      headers: call.body instanceof OnceBody ? { ...call.headers, 'content-length': String(call.body.length) } : call.headers,
      // undici's documentation accepts any Iterable as a body; its types list only a Readable.
      body: call.body as Buffer,
      signal: call.signal,
      headersTimeout: call.backend.timeoutMs,
      bodyTimeout: call.backend.timeoutMs,
    })
    .then(
      (resp) => {
        probe.answered(resp.statusCode);
        return resp;
      },
      (err: unknown) => {
        const e = classify(err, call.signal);
        probe.failed(e.kind);
        throw e;
      },
    );
}
