import type { ChatProtocol } from '../billing/index.js';
import type { GroupModel } from '../config/runtime.js';
import { estimateTokens, holdInputTokens, type Usage } from '../ir/usage.js';
import { clientCodec, type ClientDecoded, type ProtocolAdapter } from '../protocols/index.js';
import { readJson } from '../http/body.js';
import type { GatewayDeps } from '../http/deps.js';
import { badRequest, GatewayError } from '../../kernel/errors.js';
import type { RequestContext } from '../http/context.js';
import {
  callUpstream,
  chatCodecFor,
  chatProvider,
  failover,
  header,
  MIN_UPSTREAM_OUTPUT_CAP,
  responseHeaders,
  retryableFailure,
  speaks,
  type Attempt,
  type Provider,
  type UpstreamError,
  type UpstreamResponse,
} from '../upstreams/index.js';
import { TranslationError } from '../ir/chat.js';
import { translatedAttempt, type Translation } from './translate.js';
import type { CompiledBackend } from '../upstreams/types.js';
import { checkClient } from './client-policy.js';
import { keepConversation, loadConversation } from './conversations.js';
import { ChatExchange } from './exchange.js';
import { relayStream } from './relay.js';
import { decideStream } from './stream-mode.js';
import { upstreamRequest, type UpstreamRequest } from './upstream-request.js';
import { topLevelMember } from './body.js';

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
  const { entry, exchange, request } = await admit(ctx, deps, adapter);
  // Chained, not awaited in a try: no frame of this function waits out the answer.
  return forward(ctx, deps, adapter, entry, exchange, request).finally(() => exchange.close());
}

/**
 * Everything before the first upstream call, ending with the credits held. A function of its own
 * because V8 keeps every local of a suspended async function, used again or not: its locals (the
 * body, parsed, and what was derived from it) go when it returns, not when the answer ends.
 */
async function admit(
  ctx: RequestContext,
  deps: GatewayDeps,
  adapter: ProtocolAdapter,
): Promise<{ entry: GroupModel; exchange: ChatExchange; request: ClientRequest }> {
  // The contract's order: invalid body (400), key (401), no credits (402), restricted client
  // (403), model not in the group (404); the exact hold may still be a 402 after them.
  const { raw, json } = await readJson(ctx);
  const info = adapter.validate(json);
  const key = ctx.key ?? (await ctx.admitKey!());
  await deps.billing.checkAvailable?.(key.account);
  checkClient(key.group, ctx.req, json, adapter.protocol);
  const entry = key.group.entries.get(info.model);
  if (!entry || entry.model.type !== 'chat') {
    throw new GatewayError('model_not_found', `model "${info.model}" does not exist in this key's group`, { param: 'model' });
  }
  const stream = decideStream(info.stream, ctx.req.headers.accept);

  // A backend that speaks the client's protocol is passed the bytes; any other chat backend is
  // reached through the IR (decoded once, here, so a field it cannot carry is a 400 before the hold).
  const native = entry.model.backends.some((b) => speaks(b, adapter.protocol));
  const client = clientCodec(adapter.protocol);
  const foreign = entry.model.backends.filter((b) => !speaks(b, adapter.protocol));
  let decoded: ClientDecoded | undefined;
  if (foreign.length) {
    try {
      decoded = client.decode(json);
    } catch (err) {
      if (!(err instanceof TranslationError)) throw err;
      // A request the IR cannot carry: the native backends still serve it; without them it is a 400.
      if (!native) throw badRequest(err.message, err.param);
    }
    const refused = decoded?.fates.find((f) => f.fate === 'refused');
    if (refused && !native) {
      throw badRequest(`${refused.field}: ${refused.why} (model "${info.model}" is served by ${foreign.map((b) => b.provider).join(', ')})`, refused.field);
    }
    if (refused) decoded = undefined; // the native backends serve it; the others cannot
  }
  // previous_response_id on a translated path: the conversation this gateway kept for that answer
  // comes first. A backend that speaks Responses keeps its own conversations: it serves such a request.
  let earlier = '';
  if (decoded?.stored?.previousId) {
    if (native) decoded = undefined;
    else {
      const id = decoded.stored.previousId;
      const turns = await loadConversation(deps.store, id, { account: key.account, keyName: key.name });
      if (!turns) {
        throw badRequest(
          `previous_response_id "${id}" is not held by this gateway for this key (a translated answer is kept ${deps.settings.chat.storedResponsesTtlMs / 3_600_000} hours unless it was sent with store: false); send the whole conversation instead`,
          'previous_response_id',
        );
      }
      decoded.ir.messages = [...turns, ...decoded.ir.messages];
      earlier = JSON.stringify(turns);
    }
  }
  // A part or field one backend's wire has no place for (a document by URL towards Chat
  // Completions): that backend is skipped; with no backend left it is a 400 before the hold.
  const refusals = decoded ? foreign.map((b) => chatCodecFor(b)?.refusal?.(decoded.ir)) : [];
  if (decoded && !native && refusals.every((r) => r !== undefined)) {
    const r = refusals[0]!;
    throw badRequest(`${r.message} (model "${info.model}" is served by ${foreign.map((b) => b.provider).join(', ')})`, r.param);
  }
  if (!native && !decoded) {
    const spoken = [...new Set(entry.model.backends.map((b) => b.provider))].join(', ');
    const endpoints = new Set<string>();
    for (const b of entry.model.backends) for (const op of Object.keys(ENDPOINTS) as ChatProtocol[]) if (speaks(b, op)) endpoints.add(ENDPOINTS[op]);
    throw new GatewayError(
      'not_implemented',
      `model "${info.model}" is served by ${spoken}, which does not speak the ${adapter.protocol} protocol, and translation from it is not available yet; call it through ${[...endpoints].join(' or ') || 'its own endpoint'}`,
      { param: 'model' },
    );
  }

  // The hold bounds the charge: the upstream is sent the output cap the hold was sized for (set
  // when the client sent none), every answer of `n` is held for it, and the input is estimated high.
  if (info.choices > deps.settings.chat.maxChoices) {
    throw badRequest(`n must be at most ${deps.settings.chat.maxChoices} on this gateway (each answer is held for the whole output cap)`, 'n');
  }
  const outputCap = info.maxOutputTokens ?? entry.model.maxOutputTokens;
  // Held for at least what every wire takes: one that raises the cap (Responses) stays within it.
  const heldCap = Math.max(outputCap, MIN_UPSTREAM_OUTPUT_CAP) * info.choices;
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
    // A continued conversation is input too, though it is not in the body.
    estimatedInputTokens: holdInputTokens(raw) + (earlier ? holdInputTokens(Buffer.from(earlier)) : 0),
    maxOutputTokens: heldCap,
    ...(key.spendLimitMicro !== undefined ? { spendLimitMicro: key.spendLimitMicro } : {}),
    scope: ctx.scope,
  });
  // Only a group with a tokens-per-minute limit counts tokens (with Redis, a round trip each).
  const countTokens = key.group.rateLimits.tokensPerMinute
    ? (u: Usage) => {
        deps.limiter
          .addTokens(key.hash, u.inputTokens + u.outputTokens)
          .catch((err: Error) => ctx.log.warn('rate-limit counter failed', { error: err.message }));
      }
    : undefined;
  const exchange = new ChatExchange(ctx, charge, estimatedInputTokens, heldCap, entry.model.backends[0]!.model, countTokens);
  const drain = key.group.disconnectPolicy === 'drain';
  const translation: Translation | undefined = decoded
    ? {
        client,
        decoded,
        modelCode: info.model,
        stream,
        outputCap,
        secretFromEnv: deps.settings.secretFromEnv,
        dispatcher: deps.upstreamAgent,
        // With `drain`, the upstream outlives the client; otherwise it is aborted with it.
        signal: drain ? new AbortController().signal : ctx.signal,
        drain,
        ...(decoded.stored?.keep ? { keep: keeper(deps, key, info.model, decoded) } : {}),
      }
    : undefined;
  const request: ClientRequest = {
    body: { raw, json },
    explicitStream: info.stream,
    stream,
    capToSet: info.maxOutputTokens === undefined ? outputCap : undefined,
    translation,
  };
  return { entry, exchange, request };
}

interface ClientRequest {
  /**
   * The client's body, read and parsed: a passthrough attempt builds its upstream body from it.
   * Dropped once no further attempt can need it (the last backend was sent its request, or one
   * answered), so a request waiting on its upstream or a long stream does not hold it: a coding
   * agent's body runs to hundreds of KB, held twice (the bytes and the parsed strings).
   */
  body: { raw: Buffer; json: Record<string, unknown> } | undefined;
  /** The body's own `stream`; undefined when absent. */
  explicitStream: boolean | undefined;
  /** Whether the client gets a stream (decided from `stream` and Accept). */
  stream: boolean;
  /** The output cap to send when the client sent none (the one the hold was sized for). */
  capToSet: number | undefined;
  /** Set when some backend is reached through the IR. */
  translation: Translation | undefined;
}

/** Calls the backends in failover order until one answers, and relays that answer. */
async function forward(
  ctx: RequestContext,
  deps: GatewayDeps,
  adapter: ProtocolAdapter,
  entry: GroupModel,
  exchange: ChatExchange,
  c: ClientRequest,
): Promise<void> {
  const drain = ctx.key!.group.disconnectPolicy === 'drain';
  // With `drain`, the upstream outlives the client; otherwise it is aborted with it.
  const upstreamSignal = drain ? new AbortController().signal : ctx.signal;
  const usable = (backend: CompiledBackend) => {
    const provider = chatProvider(backend.provider, backend);
    if (!provider) return undefined;
    if (speaks(backend, adapter.protocol)) return { provider, codec: undefined };
    const codec = c.translation ? chatCodecFor(backend) : undefined;
    if (codec?.refusal?.(c.translation!.decoded.ir)) return undefined;
    return codec ? { provider, codec } : undefined;
  };

  // Not async: while the upstream has not answered, no frame of the attempt is suspended.
  const attempts = failover(entry.model.backends, deps.cooldowns, usable, (backend, { provider, codec }, isLast): Promise<Attempt<true>> => {
    if (codec) {
      if (isLast) c.body = undefined; // the IR carries this attempt
      return translatedAttempt(ctx, c.translation!, exchange, backend, provider, codec, isLast);
    }
    exchange.sent(backend.model);
    return callUpstream({
      backend,
      ...passthroughRequest(ctx, deps, adapter.protocol, backend, provider, c, isLast),
      signal: upstreamSignal,
      dispatcher: deps.upstreamAgent,
      scope: ctx.scope,
    }).then(
      (resp) => deliver(ctx, adapter, exchange, c, resp, isLast, drain),
      (err: unknown) => {
        const e = err as UpstreamError;
        if (e.kind !== 'aborted') {
          ctx.log.warn('upstream call failed', {
            requestId: ctx.requestId,
            model: entry.model.model,
            provider: backend.provider,
            kind: e.kind,
            code: e.causeCode,
          });
        }
        return { failed: { kind: e.kind } };
      },
    );
  });
  // Continued in a callback rather than after an await, so that this frame is not kept for the
  // whole exchange (see handleChat).
  return attempts.then((result) => {
    if ('answered' in result) return;
    const f = result.failed;
    if (f?.kind === 'aborted') return exchange.cancelled();
    exchange.unavailable(f?.kind === 'timeout' ? 504 : 502);
    if (f?.kind === 'timeout') throw new GatewayError('upstream_timeout', `the upstream did not answer in time (model "${entry.model.model}")`);
    throw new GatewayError('upstream_unavailable', `the upstream could not be reached (model "${entry.model.model}")`);
  });
}

/**
 * The upstream request of a passthrough attempt, built from the client's body, which is let go
 * after the last backend's (synchronous, so that no suspended frame holds the body meanwhile).
 */
function passthroughRequest(
  ctx: RequestContext,
  deps: GatewayDeps,
  protocol: ProtocolAdapter['protocol'],
  backend: CompiledBackend,
  provider: Provider,
  c: ClientRequest,
  isLast: boolean,
): UpstreamRequest {
  const { raw, json } = c.body!;
  if (isLast) c.body = undefined;
  return upstreamRequest(ctx, backend, provider, deps.settings.secretFromEnv, protocol, raw, json, {
    on: c.stream,
    force: c.stream && c.explicitStream === undefined,
    includeUsage: c.stream && protocol === 'chat-completions',
    capToSet: c.capToSet,
  });
}

/**
 * A passthrough backend's answer: dropped for the next backend when retryable and not the last,
 * else the client's (an upstream error as it came, a stream relayed, a JSON answer charged and sent).
 */
async function deliver(
  ctx: RequestContext,
  adapter: ProtocolAdapter,
  exchange: ChatExchange,
  c: ClientRequest,
  resp: UpstreamResponse,
  isLast: boolean,
  drain: boolean,
): Promise<Attempt<true>> {
  const status = resp.statusCode;
  const retry = status >= 400 ? await retryableFailure(resp, isLast) : undefined;
  if (retry) return { failed: retry };
  c.body = undefined; // this answer is the client's: no other backend will be tried
  if (status >= 400) {
    // The upstream's own answer, status and body unchanged (retry-after included).
    await exchange.answer(status, 'upstream_error', responseHeaders(resp.headers), await resp.body.bytes());
    return { answered: true };
  }
  if (/^text\/event-stream/i.test(header(resp.headers['content-type']) ?? '')) await relay(ctx, adapter, exchange, resp, drain);
  else await answerJson(ctx, adapter, exchange, resp);
  return { answered: true };
}

/** A non-streaming answer: read whole, usage from its JSON, charged, then sent unchanged. */
async function answerJson(ctx: RequestContext, adapter: ProtocolAdapter, exchange: ChatExchange, resp: UpstreamResponse): Promise<void> {
  let bytes: Buffer;
  try {
    bytes = await resp.body.bytes();
  } catch (err) {
    if (ctx.signal.aborted) return exchange.cancelled();
    exchange.unavailable(502);
    throw new GatewayError('upstream_unavailable', `upstream connection failed while reading the response: ${(err as Error).message}`);
  }
  exchange.usage(adapter.usageFromJson(usageMember(bytes)), true, 0);
  await exchange.answer(resp.statusCode, 'ok', responseHeaders(resp.headers), bytes);
}

/** A streamed answer: relayed byte for byte while the tap reads usage; the terminal events wait for the charge. */
async function relay(ctx: RequestContext, adapter: ProtocolAdapter, exchange: ChatExchange, resp: UpstreamResponse, drain: boolean): Promise<void> {
  const tap = adapter.createTap();
  exchange.startStream(resp.statusCode, responseHeaders(resp.headers));
  const result = await relayStream({ res: ctx.res, body: resp.body, tap, clientSignal: ctx.signal, drain });
  // A stream that arrived whole is first seen by the client when its held end is written, now.
  exchange.firstByte(result.firstByteAt);
  // Cut or cancelled before the final usage: what was reported, else an estimate.
  exchange.usage(tap.usage, tap.final, tap.textBytes);
  if (result.clientGone) return exchange.cancelled();
  // The upstream's own in-stream error event ends the stream; it is passed on as it came.
  if (tap.failed) return exchange.endStream('upstream_error', concat(result.held));
  if (result.error !== undefined || !tap.terminal) {
    const reason = result.error instanceof Error ? result.error.message : 'the upstream ended the stream early';
    return exchange.endStream('upstream_error', adapter.streamError(`upstream stream failed: ${reason}`));
  }
  return exchange.endStream('ok', concat(result.held));
}

/**
 * `{usage}` of an answer, the one member the three protocols report usage in: only that member
 * is parsed (an answer runs to hundreds of KB, and the client gets its bytes unchanged anyway).
 */
function usageMember(bytes: Buffer): { usage: unknown } | undefined {
  try {
    const text = topLevelMember(bytes, 'usage');
    return text === undefined ? undefined : { usage: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

function concat(bufs: Buffer[]): Buffer | undefined {
  return bufs.length === 0 ? undefined : bufs.length === 1 ? bufs[0] : Buffer.concat(bufs);
}

/** Keeps a translated Responses answer with the turns before it, under the id its client saw. */
function keeper(deps: GatewayDeps, key: { account: string; name: string }, model: string, decoded: ClientDecoded): Translation['keep'] {
  const stored = decoded.stored!;
  return (answer, irId) =>
    keepConversation(
      deps.store,
      stored.idOf(irId),
      { account: key.account, keyName: key.name },
      model,
      [...decoded.ir.messages, { role: 'assistant', content: answer }],
      deps.settings.chat.storedResponsesTtlMs,
    );
}
