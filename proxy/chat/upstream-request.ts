import type { RequestContext } from '../http/context.js';
import { commonHeaders, credentialOf, upstreamBody, type Operation, type Provider, type UpstreamBody } from '../upstreams/index.js';
import type { CompiledBackend } from '../upstreams/types.js';
import { rewriteBody } from './body.js';

export interface UpstreamRequest {
  path: string;
  headers: Record<string, string>;
  body: UpstreamBody;
}

/**
 * The upstream request of a passthrough: the provider's path (with Anthropic's `?beta=true` kept,
 * as Claude Code sends it), allow-listed headers plus the provider's auth and the backend's own
 * headers, and the client's body with only `model` (and the stream members) spliced.
 */
export function upstreamRequest(
  ctx: RequestContext,
  backend: CompiledBackend,
  provider: Provider,
  /** How `{env: NAME}` credentials are looked up (the settings read at start). */
  secretFromEnv: (name: string) => string | undefined,
  op: Operation,
  raw: Buffer,
  json: Record<string, unknown>,
  stream: { on: boolean; force: boolean; includeUsage: boolean; capToSet?: number | undefined },
): UpstreamRequest {
  const headers = commonHeaders(ctx.requestId, stream.on);
  provider.headers(backend, ctx.req.headers, credentialOf(backend, secretFromEnv), headers);
  if (backend.headers) Object.assign(headers, backend.headers);
  let path = provider.path(backend, op);
  if ((op === 'messages' || op === 'count-tokens') && ctx.query.get('beta') === 'true') path += '?beta=true';
  const cap = stream.capToSet === undefined ? undefined : { key: capMember(provider, op), value: stream.capToSet };
  const body = upstreamBody(
    rewriteBody(raw, { model: backend.model, forceStream: stream.force, includeUsage: stream.includeUsage, json, ...(cap ? { cap } : {}) }),
  );
  return { path, headers, body };
}

/**
 * The member that carries the output cap of `op`: OpenAI's reasoning models (at OpenAI and on
 * Azure) take only max_completion_tokens, while many compatible servers know only max_tokens.
 */
function capMember(provider: Provider, op: Operation): string {
  if (op === 'responses') return 'max_output_tokens';
  if (op === 'chat-completions') return provider.name === 'openai' || provider.name === 'azure-openai' ? 'max_completion_tokens' : 'max_tokens';
  return 'max_tokens';
}
