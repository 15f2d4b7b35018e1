import type { RequestContext } from '../http/context.js';
import type { GatewayDeps } from '../http/deps.js';
import { sendJson } from '../http/send.js';
import { clientCodec } from '../protocols/index.js';
import {
  callUpstream,
  commonHeaders,
  credentialOf,
  retryableFailure,
  type Attempt,
  type Provider,
  type UpstreamError,
  type UpstreamResponse,
} from '../upstreams/index.js';
import type { CompiledBackend } from '../upstreams/types.js';

/**
 * count_tokens on a provider that counts in its own wire (Gemini's countTokens): the Messages
 * request through the IR, the provider's count answered as `{input_tokens}`. Where the request
 * cannot be translated or the backend cannot count, the estimate count_tokens gives any model.
 */
export async function countTranslated(
  ctx: RequestContext,
  deps: GatewayDeps,
  backend: CompiledBackend,
  provider: Provider,
  json: Record<string, unknown>,
  isLast: boolean,
  /** Answers count_tokens' own estimate. */
  estimated: () => Promise<void>,
): Promise<Attempt<true>> {
  const estimate = async (): Promise<Attempt<true>> => {
    await estimated();
    return { answered: true };
  };
  let call: { path: string; body: Record<string, unknown> } | undefined;
  try {
    // count_tokens carries no max_tokens; the decoder asks for none.
    call = provider.countTokens!.call(backend, clientCodec('messages').decode({ max_tokens: 1, ...json }).ir);
  } catch {
    return estimate();
  }
  if (!call) return estimate();
  const credential = credentialOf(backend, deps.settings.secretFromEnv);
  const headers = commonHeaders(ctx.requestId, false);
  provider.headers(backend, ctx.req.headers, credential, headers);
  if (backend.headers) Object.assign(headers, backend.headers);
  const out = { path: call.path, headers, body: Buffer.from(JSON.stringify(call.body)) };
  let resp: UpstreamResponse;
  try {
    await provider.authorize?.(backend, credential, out, deps.settings.secretFromEnv);
    resp = await callUpstream({ backend, ...out, signal: ctx.signal, dispatcher: deps.upstreamAgent, scope: ctx.scope });
  } catch (err) {
    return { failed: { kind: (err as UpstreamError).kind ?? 'unavailable' } };
  }
  const retry = await retryableFailure(resp, isLast);
  if (retry) return { failed: retry };
  const body: unknown = await resp.body.json().catch(() => undefined);
  const n = resp.statusCode < 300 ? provider.countTokens!.count(body) : undefined;
  // A count the provider would not give is no reason to fail the client's context accounting.
  if (n === undefined) return estimate();
  sendJson(ctx.res, 200, { input_tokens: n });
  return { answered: true };
}
