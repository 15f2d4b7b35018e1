import { estimateTokens } from '../ir/usage.js';
import { CountTokensRequest } from '../protocols/messages/index.js';
import { parseWire } from '../protocols/validate.js';
import { readJson } from '../http/body.js';
import { GatewayError } from '../../kernel/errors.js';
import { sendJson } from '../http/send.js';
import type { RequestContext } from '../http/context.js';
import { callUpstream, chatProvider, coolDown, cooldownMs, orderBackends, responseHeaders, type UpstreamError } from '../upstreams/index.js';
import { checkClient } from './client-policy.js';
import { upstreamRequest } from './upstream-request.js';

/** Marks a count the gateway estimated itself (the backend has no count_tokens). */
export const ESTIMATE_HEADER = 'x-tollgate-token-count';

/**
 * POST /v1/messages/count_tokens: free, never held or charged. Forwarded to an Anthropic backend
 * (unless its route sets capabilities.countTokens: false); for a model without one, estimated
 * from the request's size and marked with `x-tollgate-token-count: estimated`, so Claude Code's
 * context accounting keeps working on any backend.
 */
export async function handleCountTokens(ctx: RequestContext): Promise<void> {
  const { raw, json } = await readJson(ctx);
  const req = parseWire(CountTokensRequest, json, 'invalid count_tokens request');
  const key = ctx.key!;
  const entry = key.group.entries.get(req.model);
  if (!entry || entry.model.type !== 'chat') {
    throw new GatewayError('model_not_found', `model "${req.model}" does not exist in this key's group`, { param: 'model' });
  }
  checkClient(key.group, ctx.req, json, 'count-tokens');

  const candidates =
    entry.model.capabilities.countTokens === false
      ? []
      : orderBackends(entry.model.backends).flatMap((backend) => {
          const provider = chatProvider(backend.provider);
          return provider?.speaks.has('count-tokens') ? [{ backend, provider }] : [];
        });
  if (candidates.length === 0) {
    sendJson(ctx.res, 200, { input_tokens: estimateTokens(raw.length) }, { [ESTIMATE_HEADER]: 'estimated' });
    return;
  }

  let last: UpstreamError | undefined;
  for (let i = 0; i < candidates.length; i++) {
    const { backend, provider } = candidates[i]!;
    const call = upstreamRequest(ctx, backend, provider, 'count-tokens', raw, json, { on: false, force: false, includeUsage: false });
    let resp;
    try {
      resp = await callUpstream({ backend, ...call, signal: ctx.signal });
    } catch (err) {
      last = err as UpstreamError;
      if (last.kind === 'aborted') return;
      coolDown(backend, cooldownMs(last.kind));
      continue;
    }
    const status = resp.statusCode;
    if ((status === 429 || status >= 500) && i < candidates.length - 1) {
      await resp.body.dump().catch(() => {});
      continue;
    }
    const bytes = Buffer.from(await resp.body.arrayBuffer());
    ctx.res.writeHead(status, { ...responseHeaders(resp.headers), 'content-length': String(bytes.length) });
    ctx.res.end(bytes);
    return;
  }
  if (last?.kind === 'timeout') throw new GatewayError('upstream_timeout', `the upstream did not answer in time (model "${entry.model.model}")`);
  throw new GatewayError('upstream_unavailable', `the upstream could not be reached (model "${entry.model.model}")`);
}
