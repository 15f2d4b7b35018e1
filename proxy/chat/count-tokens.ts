import { estimateTokens } from '../ir/usage.js';
import { CountTokensRequest } from '../protocols/messages/index.js';
import { parseWire } from '../protocols/validate.js';
import { readJson } from '../http/body.js';
import { GatewayError } from '../../kernel/errors.js';
import { sendJson } from '../http/send.js';
import type { RequestContext } from '../http/context.js';
import { callUpstream, chatProvider, failover, responseHeaders, retryableFailure, speaks, type Attempt, type UpstreamError } from '../upstreams/index.js';
import type { CompiledBackend } from '../upstreams/types.js';
import type { GatewayDeps } from '../http/deps.js';
import { checkClient } from './client-policy.js';
import { upstreamRequest } from './upstream-request.js';
import { countTranslated } from './count-translated.js';
import { countTokens, tokenizerOf } from './tokenizer.js';
import { clientCodec } from '../protocols/index.js';
import { TranslationError } from '../ir/chat.js';

/** Marks a count the gateway made itself (the backend has no count_tokens): `estimated`, or `tokenizer NAME`. */
export const ESTIMATE_HEADER = 'x-tollgate-token-count';

/**
 * POST /v1/messages/count_tokens: free, never held or charged. Forwarded to an Anthropic backend
 * (unless its route sets capabilities.countTokens: false), or counted by a provider that counts in
 * its own wire (Gemini; count-translated.ts); for a model without one, counted with the model
 * family's public tokenizer (OpenAI's o200k_base; `x-tollgate-token-count: tokenizer o200k_base`)
 * or estimated from the request's size (`x-tollgate-token-count: estimated`), so Claude Code's
 * context accounting keeps working on any backend.
 */
export async function handleCountTokens(ctx: RequestContext, deps: GatewayDeps): Promise<void> {
  const { raw, json } = await readJson(ctx);
  const req = parseWire(CountTokensRequest, json, 'invalid count_tokens request');
  // The chat endpoints' order of errors (handler.ts), though counting is free.
  const key = ctx.key ?? (await ctx.admitKey!());
  await deps.billing.checkAvailable?.(key.account);
  checkClient(key.group, ctx.req, json, 'count-tokens');
  const entry = key.group.entries.get(req.model);
  if (!entry || entry.model.type !== 'chat') {
    throw new GatewayError('model_not_found', `model "${req.model}" does not exist in this key's group`, { param: 'model' });
  }

  const usable = (backend: CompiledBackend) => {
    const provider = chatProvider(backend.provider, backend);
    return provider && (speaks(backend, 'count-tokens') || provider.countTokens) ? provider : undefined;
  };
  // Without a backend that counts: the model family's public tokenizer where there is one, else an estimate.
  const estimated = async () => {
    const tokenizer = tokenizerOf(entry.model.backends[0]!);
    if (tokenizer) {
      try {
        const n = await countTokens(clientCodec('messages').decode(json).ir);
        return sendJson(ctx.res, 200, { input_tokens: n }, { [ESTIMATE_HEADER]: `tokenizer ${tokenizer}` });
      } catch (err) {
        if (!(err instanceof TranslationError)) throw err;
      }
    }
    sendJson(ctx.res, 200, { input_tokens: estimateTokens(raw.length) }, { [ESTIMATE_HEADER]: 'estimated' });
  };
  if (entry.model.capabilities.countTokens === false || !entry.model.backends.some((b) => usable(b))) return estimated();

  const result = await failover(entry.model.backends, deps.cooldowns, usable, async (backend, provider, isLast): Promise<Attempt<true>> => {
    if (!speaks(backend, 'count-tokens')) return countTranslated(ctx, deps, backend, provider, json, isLast, estimated);
    const call = upstreamRequest(ctx, backend, provider, deps.settings.secretFromEnv, 'count-tokens', raw, json, {
      on: false,
      force: false,
      includeUsage: false,
    });
    let resp;
    try {
      resp = await callUpstream({ backend, ...call, signal: ctx.signal, dispatcher: deps.upstreamAgent, scope: ctx.scope });
    } catch (err) {
      return { failed: { kind: (err as UpstreamError).kind } };
    }
    const retry = await retryableFailure(resp, isLast);
    if (retry) return { failed: retry };
    const status = resp.statusCode;
    const bytes = await resp.body.bytes();
    ctx.res.writeHead(status, { ...responseHeaders(resp.headers), 'content-length': String(bytes.length) });
    ctx.res.end(bytes);
    return { answered: true };
  });
  if ('answered' in result || result.failed?.kind === 'aborted') return;
  if (result.failed?.kind === 'timeout') throw new GatewayError('upstream_timeout', `the upstream did not answer in time (model "${entry.model.model}")`);
  throw new GatewayError('upstream_unavailable', `the upstream could not be reached (model "${entry.model.model}")`);
}
