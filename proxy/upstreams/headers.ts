import type { IncomingHttpHeaders } from 'node:http';

/**
 * Header policy (docs/chat.md "Header policy").
 *
 * Upstream requests are built from an allow-list, never by copying the client's headers: the
 * client's Authorization / x-api-key (our key, not the provider's), cookies, hop-by-hop headers,
 * host and content-length never travel. Each provider adds its own protocol headers
 * (anthropic-version, anthropic-beta; openai-beta). Every request carries our user-agent, JSON
 * content type, an identity accept-encoding (the usage tap reads plain bytes) and our
 * x-request-id.
 *
 * Upstream responses are passed back with their status and headers except hop-by-hop headers,
 * content-length/encoding framing (the gateway frames the body itself), set-cookie, and the
 * upstream's own request id header (the client sees the gateway's x-request-id).
 */
export const USER_AGENT = 'tollgate/0.1';

const RESPONSE_DROP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
  'content-length',
  'set-cookie',
  'x-request-id',
  'date',
  'server',
  'alt-svc',
  'via',
]);

export function commonHeaders(requestId: string, stream: boolean): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: stream ? 'text/event-stream' : 'application/json',
    'accept-encoding': 'identity',
    'user-agent': USER_AGENT,
    'x-request-id': requestId,
  };
}

/** A client header as one string (repeated headers joined with ", "). */
export function clientHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(', ') : v;
}

/** Upstream response headers to send to the client. */
export function responseHeaders(upstream: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in upstream) {
    const v = upstream[name];
    if (v === undefined || RESPONSE_DROP.has(name)) continue;
    out[name] = v;
  }
  return out;
}

/** A response header's value as one string: the first, when it came more than once. */
export function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
