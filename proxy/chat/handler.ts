import type { Dispatcher } from 'undici';
import type { ChatProtocol, ChatSettlement } from '../billing/types.js';
import type { GroupModel } from '../config/runtime.js';
import { estimateTokens, type Usage } from '../ir/usage.js';
import type { ProtocolAdapter } from '../protocols/index.js';
import { readJson } from '../http/body.js';
import type { GatewayDeps } from '../http/deps.js';
import { GatewayError } from '../../kernel/errors.js';
import type { RequestContext } from '../http/context.js';
import { callUpstream, chatProvider, coolDown, cooldownMs, orderBackends, responseHeaders, UpstreamError, type Provider } from '../upstreams/index.js';
import type { CompiledBackend } from '../upstreams/types.js';
import { checkClient } from './client-policy.js';
import { coalesce, relayStream } from './relay.js';
import { decideStream } from './stream-mode.js';
import { upstreamRequest } from './upstream-request.js';

const ENDPOINTS: Record<ChatProtocol, string> = {
  'chat-completions': '/v1/chat/completions',
  responses: '/v1/responses',
  messages: '/v1/messages',
};

/**
 * One chat request, any of the three protocols, passed through to a backend that speaks it:
 * validate -> model in group -> client policy -> hold credits -> call (failing over while nothing
 * was sent) -> relay the bytes while a tap reads usage -> settle. Every path after the hold
 * settles exactly once, and a client that has its final byte has been charged durably.
 */
export async function handleChat(ctx: RequestContext, deps: GatewayDeps, adapter: ProtocolAdapter): Promise<void> {
  const { raw, json } = await readJson(ctx);
  const info = adapter.validate(json);
  const key = ctx.key!;
  const entry = key.group.entries.get(info.model);
  if (!entry || entry.model.type !== 'chat') {
    throw new GatewayError('model_not_found', `model "${info.model}" does not exist in this key's group`, { param: 'model' });
  }
  checkClient(key.group, ctx.req, json, adapter.protocol);
  const stream = decideStream(info.stream, ctx.req.headers.accept);

  const candidates: { backend: CompiledBackend; provider: Provider }[] = [];
  for (const backend of orderBackends(entry.model.backends)) {
    const provider = chatProvider(backend.provider);
    if (provider?.speaks.has(adapter.protocol)) candidates.push({ backend, provider });
  }
  if (candidates.length === 0) {
    const spoken = [...new Set(entry.model.backends.map((b) => b.provider))].join(', ');
    const endpoints = new Set<string>();
    for (const b of entry.model.backends)
      for (const op of chatProvider(b.provider)?.speaks ?? []) if (op in ENDPOINTS) endpoints.add(ENDPOINTS[op as ChatProtocol]);
    throw new GatewayError(
      'not_implemented',
      `model "${info.model}" is served by ${spoken}, which does not speak the ${adapter.protocol} protocol (translation between protocols is not available); call it through ${[...endpoints].join(' or ') || 'its own endpoint'}`,
      { param: 'model' },
    );
  }

  const estimatedInputTokens = estimateTokens(raw.length);
  const charge = await deps.billing.holdChat({
    requestId: ctx.requestId,
    keyHash: key.hash,
    keyName: key.name,
    account: key.account,
    group: key.group.name,
    model: info.model,
    protocol: adapter.protocol,
    prices: entry.prices,
    estimatedInputTokens,
    maxOutputTokens: info.maxOutputTokens ?? entry.model.maxOutputTokens,
    ...(key.spendLimitMicro !== undefined ? { spendLimitMicro: key.spendLimitMicro } : {}),
  });

  const outcome: ChatSettlement = {
    usage: null,
    usageSource: 'reported',
    status: 'failed',
    httpStatus: 500,
    upstreamModel: candidates[0]!.backend.model,
    latencyMs: 0,
  };
  // Exactly one settle() per request: before the final bytes on the paths that answer, in the
  // finally block on the others (client gone, 502/504, a throw).
  let settling: Promise<void> | undefined;
  const settle = () =>
    (settling ??= (async () => {
      outcome.latencyMs = Number(process.hrtime.bigint() - ctx.startedAt) / 1e6;
      await charge.settle(outcome);
    })());
  try {
    await forward(ctx, deps, adapter, entry, candidates, raw, json, info.stream, stream, estimatedInputTokens, outcome, settle);
  } finally {
    // Errors of settle itself are logged, never shown to a client that already has its answer.
    await settle().catch((err: Error) => ctx.log.error('settlement failed', { requestId: ctx.requestId, error: err.message }));
  }
}

async function forward(
  ctx: RequestContext,
  deps: GatewayDeps,
  adapter: ProtocolAdapter,
  entry: GroupModel,
  candidates: { backend: CompiledBackend; provider: Provider }[],
  raw: Buffer,
  json: Record<string, unknown>,
  explicitStream: boolean | undefined,
  stream: boolean,
  estimatedInputTokens: number,
  outcome: ChatSettlement,
  settle: () => Promise<void>,
): Promise<void> {
  const drain = ctx.key!.group.disconnectPolicy === 'drain';
  // With `drain`, the upstream outlives the client; otherwise it is aborted with it.
  const upstreamSignal = drain ? new AbortController().signal : ctx.signal;
  let lastFailure: UpstreamError | undefined;

  for (let i = 0; i < candidates.length; i++) {
    const { backend, provider } = candidates[i]!;
    const isLast = i === candidates.length - 1;
    outcome.upstreamModel = backend.model;
    const call = upstreamRequest(ctx, backend, provider, adapter.protocol, raw, json, {
      on: stream,
      force: stream && explicitStream === undefined,
      includeUsage: stream && adapter.protocol === 'chat-completions',
    });

    let resp: Dispatcher.ResponseData;
    try {
      resp = await callUpstream({ backend, ...call, signal: upstreamSignal });
    } catch (err) {
      const e = err as UpstreamError;
      if (e.kind === 'aborted') {
        outcome.status = 'cancelled';
        outcome.httpStatus = 499;
        return;
      }
      coolDown(backend, cooldownMs(e.kind));
      lastFailure = e;
      ctx.log.warn('upstream call failed', { requestId: ctx.requestId, model: entry.model.model, provider: backend.provider, kind: e.kind, code: e.causeCode });
      continue;
    }

    const status = resp.statusCode;
    if (status >= 400) {
      const retryable = status === 429 || status >= 500;
      if (retryable) coolDown(backend, cooldownMs('status', status, header(resp.headers['retry-after'])));
      if (retryable && !isLast) {
        await resp.body.dump().catch(() => {});
        continue;
      }
      // The upstream's own answer, status and body unchanged (retry-after included).
      const bytes = Buffer.from(await resp.body.arrayBuffer());
      outcome.status = 'upstream_error';
      outcome.httpStatus = status;
      await settle();
      ctx.res.writeHead(status, { ...responseHeaders(resp.headers), 'content-length': String(bytes.length) });
      ctx.res.end(bytes);
      return;
    }

    const isSse = /^text\/event-stream/i.test(header(resp.headers['content-type']) ?? '');
    if (!isSse) {
      let bytes: Buffer;
      try {
        bytes = Buffer.from(await resp.body.arrayBuffer());
      } catch (err) {
        const e = err as Error;
        if (ctx.signal.aborted) {
          outcome.status = 'cancelled';
          outcome.httpStatus = 499;
          return;
        }
        outcome.status = 'upstream_error';
        outcome.httpStatus = 502;
        throw new GatewayError('upstream_unavailable', `upstream connection failed while reading the response: ${e.message}`);
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(bytes.toString('utf8'));
      } catch {
        parsed = undefined;
      }
      const usage = adapter.usageFromJson(parsed);
      outcome.usage = usage;
      outcome.usageSource = usage ? 'reported' : 'estimated';
      if (!usage) outcome.usage = estimate(estimatedInputTokens, 0);
      outcome.status = 'ok';
      outcome.httpStatus = status;
      // Charged before the client sees the answer.
      await settle();
      ctx.res.writeHead(status, { ...responseHeaders(resp.headers), 'content-length': String(bytes.length) });
      ctx.res.end(bytes);
      return;
    }

    const tap = adapter.createTap();
    // The head goes out at once, together with the first events when they came with it.
    coalesce(ctx.res);
    ctx.res.writeHead(status, responseHeaders(resp.headers));
    ctx.res.flushHeaders();
    const result = await relayStream({ res: ctx.res, body: resp.body, tap, clientSignal: ctx.signal, drain });
    // A stream that arrived whole is first seen by the client when its held end is written, now.
    outcome.ttftMs = Number((result.firstByteAt ?? process.hrtime.bigint()) - ctx.startedAt) / 1e6;
    outcome.httpStatus = status;
    if (tap.usage && tap.final) {
      outcome.usage = tap.usage;
      outcome.usageSource = 'reported';
    } else {
      // Cut or cancelled before the final usage: what was reported, else an estimate.
      outcome.usage = mergeEstimate(tap.usage, estimatedInputTokens, estimateTokens(tap.textBytes));
      outcome.usageSource = 'estimated';
    }
    if (result.clientGone) {
      outcome.status = 'cancelled';
      outcome.httpStatus = 499;
      return;
    }
    if (tap.failed) {
      // The upstream's own in-stream error event ends the stream; it is passed on as it came.
      outcome.status = 'upstream_error';
      await settle();
      ctx.res.end(concat(result.held));
      return;
    }
    if (result.error !== undefined || !tap.terminal) {
      outcome.status = 'upstream_error';
      await settle();
      const reason = result.error instanceof Error ? result.error.message : 'the upstream ended the stream early';
      ctx.res.end(adapter.streamError(`upstream stream failed: ${reason}`));
      return;
    }
    outcome.status = 'ok';
    await settle();
    ctx.res.end(concat(result.held));
    return;
  }

  const f = lastFailure;
  outcome.status = 'upstream_error';
  outcome.httpStatus = f?.kind === 'timeout' ? 504 : 502;
  if (f?.kind === 'timeout') throw new GatewayError('upstream_timeout', `the upstream did not answer in time (model "${entry.model.model}")`);
  throw new GatewayError('upstream_unavailable', `the upstream could not be reached (model "${entry.model.model}")`);
}

function estimate(input: number, output: number): Usage {
  return { inputTokens: input, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: output, reasoningTokens: 0 };
}

/** Reported parts win (e.g. message_start's input tokens); missing parts are estimated. */
function mergeEstimate(partial: Usage | null, input: number, output: number): Usage {
  if (!partial) return estimate(input, output);
  return { ...partial, inputTokens: partial.inputTokens || input, outputTokens: Math.max(partial.outputTokens, output) };
}

function concat(bufs: Buffer[]): Buffer | undefined {
  return bufs.length === 0 ? undefined : bufs.length === 1 ? bufs[0] : Buffer.concat(bufs);
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
