import type { Readable } from 'node:stream';
import { classify, targetOf } from './http.js';
import { header, USER_AGENT } from './headers.js';
import { retryAfterMs } from './retry-after.js';
import { ProviderError, type ProviderContext } from './task-provider.js';

/** What an HTTP call of a task provider needs of its context: the backend and the gateway's agent. */
export type ProviderTarget = Pick<ProviderContext, 'backend' | 'dispatcher'>;

/**
 * HTTP for task providers: one call to the backend, its JSON answer, and the mapping of what
 * went wrong onto ProviderError (429/5xx/connection: retryable; other 4xx: the task fails with
 * the upstream's own code and message). Wire formats stay in the adapters.
 */
export interface ProviderCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | Readable;
  signal: AbortSignal;
}

export interface ProviderResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: unknown;
}

/** Largest JSON answer read (inline base64 images of four 4K pictures fit easily). */
const MAX_JSON = 512 * 1024 * 1024;

export async function callProvider(target: ProviderTarget, call: ProviderCall): Promise<ProviderResponse> {
  const { backend } = target;
  const t = targetOf(backend);
  let resp;
  try {
    resp = await target.dispatcher.request({
      origin: t.origin,
      path: t.basePath + call.path,
      method: call.method,
      headers: { 'user-agent': USER_AGENT, accept: 'application/json', 'accept-encoding': 'identity', ...backend.headers, ...call.headers },
      body: call.body ?? null,
      signal: call.signal,
      headersTimeout: backend.timeoutMs,
      bodyTimeout: backend.timeoutMs,
    });
  } catch (err) {
    throw toProviderError(err, call.signal);
  }
  let text: string;
  try {
    const declared = Number(resp.headers['content-length'] ?? 0);
    if (declared > MAX_JSON) throw new Error(`answer of ${declared} bytes is too large`);
    text = await resp.body.text();
  } catch (err) {
    throw toProviderError(err, call.signal);
  }
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (json === undefined && resp.statusCode < 300) {
    throw new ProviderError(true, 'upstream_invalid_response', `the upstream answered ${resp.statusCode} with a body that is not JSON`);
  }
  return { status: resp.statusCode, headers: resp.headers, json };
}

/** Connection-level failures: retryable; an abort is passed on as it is. */
export function toProviderError(err: unknown, signal: AbortSignal): Error {
  const e = classify(err, signal);
  if (e.kind === 'aborted') return signal.reason instanceof Error ? signal.reason : e;
  return new ProviderError(true, e.kind === 'timeout' ? 'upstream_timeout' : 'upstream_unavailable', `the upstream could not be reached: ${e.message}`);
}

/** A provider's code or words for "refused by its safety system". */
const BLOCKED = /content_policy|moderation|safety|blocked|flagged|sensitive|nsfw|\bE005\b/i;

/** The gateway's task error code for a provider's refusal of the content, whatever the provider calls it. */
export function blockedCode(...signals: (string | undefined)[]): 'content_blocked' | undefined {
  return signals.some((s) => s !== undefined && BLOCKED.test(s)) ? 'content_blocked' : undefined;
}

/**
 * An HTTP error answer: `message` is the upstream's own words when it gave some. 429 and 5xx get
 * the gateway's codes (rate_limited, upstream_error: what a failed task reports); another 4xx keeps
 * the upstream's code, content_blocked when it names a safety refusal.
 */
export function statusError(r: ProviderResponse, message: string | undefined, code: string | undefined): ProviderError {
  const retryable = r.status === 429 || r.status >= 500;
  const after = retryAfterMs(r.headers);
  const own = r.status === 429 ? 'rate_limited' : retryable ? 'upstream_error' : (blockedCode(code) ?? code ?? 'upstream_rejected');
  return new ProviderError(retryable, own, `the upstream answered ${r.status}${code && code !== own ? ` (${code})` : ''}${message ? `: ${message}` : ''}`, {
    status: r.status,
    ...(after !== undefined ? { retryAfterMs: after } : {}),
  });
}

/** Redirects a result file's GET follows (a storage host, a CDN) before it gives up. */
const MAX_REDIRECTS = 5;

/**
 * GET of a result file on the provider, streamed, following redirects. `auth` travels only to the
 * backend's own origin, on every hop: a redirect to a storage host or a CDN is followed without
 * the provider's credential, as Google's file downloads and signed-URL hosts expect.
 */
export async function openUrl(
  target: ProviderTarget,
  url: string,
  signal: AbortSignal,
  auth?: Record<string, string>,
): Promise<{ body: Readable; contentType?: string }> {
  const { backend } = target;
  const origin = targetOf(backend).origin;
  let u = resultUrl(url);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    let resp;
    try {
      resp = await target.dispatcher.request({
        origin: u.origin,
        path: `${u.pathname}${u.search}`,
        method: 'GET',
        headers: { 'user-agent': USER_AGENT, ...(u.origin === origin ? auth : {}) },
        signal,
        headersTimeout: backend.timeoutMs,
        bodyTimeout: backend.timeoutMs,
      });
    } catch (err) {
      throw toProviderError(err, signal);
    }
    const location = header(resp.headers.location);
    if (resp.statusCode >= 300 && resp.statusCode < 400 && location) {
      await resp.body.dump().catch(() => {});
      u = resultUrl(location, u);
      continue;
    }
    if (resp.statusCode !== 200) {
      await resp.body.dump().catch(() => {});
      const retryable = resp.statusCode === 429 || resp.statusCode >= 500;
      throw new ProviderError(retryable, 'result_unavailable', `the upstream's result file answered ${resp.statusCode}`, { status: resp.statusCode });
    }
    const type = header(resp.headers['content-type']);
    return { body: resp.body, ...(type ? { contentType: type } : {}) };
  }
  throw new ProviderError(false, 'result_unavailable', `the upstream's result file redirected more than ${MAX_REDIRECTS} times`);
}

function resultUrl(url: string, base?: URL): URL {
  let u: URL | undefined;
  try {
    u = new URL(url, base);
  } catch {
    // not a URL: the same answer as a scheme we do not fetch
  }
  if (u?.protocol !== 'http:' && u?.protocol !== 'https:')
    throw new ProviderError(false, 'upstream_invalid_response', 'the upstream gave a result URL that is not http(s)');
  return u;
}
