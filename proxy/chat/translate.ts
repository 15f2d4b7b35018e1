import type { OutgoingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../../kernel/errors.js';
import type { IrPart, IrResponse, IrStreamPart } from '../ir/chat.js';
import type { RequestContext } from '../http/context.js';
import type { ClientChatCodec, ClientDecoded } from '../protocols/index.js';
import { SseParser } from '../sse/index.js';
import {
  callUpstream,
  commonHeaders,
  credentialOf,
  header,
  retryableFailure,
  upstreamBody,
  type Attempt,
  type AttemptFailure,
  type Provider,
  type UpstreamBody,
  type UpstreamChatCodec,
  type UpstreamError,
  type UpstreamResponse,
} from '../upstreams/index.js';
import type { CompiledBackend } from '../upstreams/types.js';
import { answerOf } from './conversations.js';
import type { ChatExchange } from './exchange.js';
import { coalesce, drained } from './relay.js';

/** The response header naming the request fields translation dropped (hints the backend cannot take). */
export const DROPPED_HEADER = 'x-tollgate-dropped-fields';

export interface Translation {
  client: ClientChatCodec;
  decoded: ClientDecoded;
  /** The gateway's model code: what the client sees in translated answers. */
  modelCode: string;
  stream: boolean;
  /** The output cap the hold was sized for: always sent upstream. */
  outputCap: number;
  secretFromEnv: (name: string) => string | undefined;
  dispatcher: Dispatcher;
  signal: AbortSignal;
  drain: boolean;
  /** Keeps the answer for a later previous_response_id (Responses clients that did not send store: false). */
  keep?: (answer: IrPart[], irId: string) => Promise<void>;
}

/** The answer kept before its last bytes leave, so a fast client's next turn finds it; a failure costs only that. */
async function keepAnswer(ctx: RequestContext, t: Translation, answer: IrPart[], irId: string): Promise<void> {
  try {
    await t.keep?.(answer, irId);
  } catch (err) {
    ctx.log.warn('could not keep the translated response for previous_response_id', { error: (err as Error).message });
  }
}

/**
 * One attempt on a backend that does not speak the client's protocol: the IR encoded for it, its
 * answer decoded and re-encoded for the client. Money as in passthrough: usage from the
 * upstream's own report, charged before the final bytes (the exchange sees to that).
 */
export async function translatedAttempt(
  ctx: RequestContext,
  t: Translation,
  exchange: ChatExchange,
  backend: CompiledBackend,
  provider: Provider,
  codec: UpstreamChatCodec,
  isLast: boolean,
): Promise<Attempt<true>> {
  exchange.sent(backend.model);
  const prepared = await translatedRequest(ctx, t, backend, provider, codec);
  if ('failed' in prepared) return prepared;
  let resp: UpstreamResponse;
  try {
    resp = await callUpstream({ backend, ...prepared, signal: t.signal, dispatcher: t.dispatcher, scope: ctx.scope });
  } catch (err) {
    return { failed: { kind: (err as UpstreamError).kind } };
  }
  const dropped = t.decoded.fates.filter((f) => f.fate === 'dropped' && !codec.carries?.has(f.field)).map((f) => f.field);
  const extra: OutgoingHttpHeaders = dropped.length ? { [DROPPED_HEADER]: dropped.join(', ') } : {};
  const status = resp.statusCode;
  if (status >= 400) {
    const retry = await retryableFailure(resp, isLast);
    if (retry) return { failed: retry };
    // The upstream's refusal in the client's shape, its status kept, and how long it asked to
    // wait: both SDKs read retry-after-ms before retry-after.
    const wait: OutgoingHttpHeaders = {};
    for (const name of ['retry-after', 'retry-after-ms']) {
      const v = header(resp.headers[name]);
      if (v) wait[name] = v;
    }
    const e = codec.error(await resp.body.json().catch(() => undefined));
    const bytes = Buffer.from(JSON.stringify(t.client.error(status, e.message)));
    await exchange.answer(status, 'upstream_error', { 'content-type': 'application/json', ...wait, ...extra }, bytes);
    return { answered: true };
  }
  const contentType = header(resp.headers['content-type']) ?? '';
  const isSse = /^text\/event-stream/i.test(contentType) || (codec.streamType?.test(contentType) ?? false);
  if (!t.stream) {
    const answer = codec.decode(await readJson(resp, ctx, exchange));
    exchange.usage(answer.usage, true, 0);
    await keepAnswer(ctx, t, answer.content, answer.id);
    const bytes = Buffer.from(JSON.stringify(t.decoded.encode(answer, t.modelCode)));
    await exchange.answer(200, 'ok', { 'content-type': 'application/json', ...extra }, bytes);
    return { answered: true };
  }
  await relayTranslated(ctx, t, exchange, codec, resp, isSse, extra);
  return { answered: true };
}

/**
 * The IR encoded for the backend, with its headers and auth. A function of its own, returning
 * before the call: V8 keeps every local of a suspended async function, and the attempt waits on
 * its upstream for a whole answer; the body itself is handed over as undici lets go of it.
 */
async function translatedRequest(
  ctx: RequestContext,
  t: Translation,
  backend: CompiledBackend,
  provider: Provider,
  codec: UpstreamChatCodec,
): Promise<{ path: string; headers: Record<string, string>; body: UpstreamBody } | { failed: AttemptFailure }> {
  // What a backend cannot carry was refused before the hold (codec.refusal): encoding cannot fail here.
  const body = Buffer.from(JSON.stringify(codec.encode({ ...t.decoded.ir, stream: t.stream }, backend.model, t.outputCap)));
  const headers = commonHeaders(ctx.requestId, t.stream);
  const credential = credentialOf(backend, t.secretFromEnv);
  provider.headers(backend, ctx.req.headers, credential, headers);
  if (backend.headers) Object.assign(headers, backend.headers);
  // authorize() may complete the path (Vertex: the project named by the service account key).
  const call = { path: codec.path?.(backend, t.stream) ?? provider.path(backend, codec.op), headers, body };
  try {
    await provider.authorize?.(backend, credential, call, t.secretFromEnv);
  } catch (err) {
    ctx.log.warn('upstream auth failed', { requestId: ctx.requestId, provider: backend.provider, error: (err as Error).message });
    return { failed: { kind: 'unavailable' } };
  }
  return { path: call.path, headers, body: upstreamBody(body) };
}

async function readJson(resp: UpstreamResponse, ctx: RequestContext, exchange: ChatExchange): Promise<unknown> {
  try {
    return await resp.body.json();
  } catch (err) {
    if (ctx.signal.aborted) exchange.cancelled();
    else exchange.unavailable(502);
    throw new GatewayError('upstream_unavailable', `the upstream's answer could not be read: ${(err as Error).message}`);
  }
}

/** A whole answer as the parts a stream would have carried (an upstream that answered JSON to a stream request). */
function partsOf(r: IrResponse): IrStreamPart[] {
  const out: IrStreamPart[] = [{ type: 'start', id: r.id }];
  r.content.forEach((p, index) => {
    if (p.type === 'text') out.push({ type: 'text', index, delta: p.text });
    else if (p.type === 'reasoning') out.push({ type: 'reasoning', index, delta: p.text });
    else if (p.type === 'tool_call')
      out.push({ type: 'tool_call_start', index, id: p.id, name: p.name }, { type: 'tool_call_delta', index, arguments: p.arguments });
    else return;
    out.push({ type: 'block_end', index });
  });
  out.push({ type: 'finish', finish: r.finish, usage: r.usage });
  return out;
}

/**
 * The upstream's stream decoded to IR parts and encoded for the client as they come; the finish
 * (the client protocol's terminal events) waits for the charge.
 */
async function relayTranslated(
  ctx: RequestContext,
  t: Translation,
  exchange: ChatExchange,
  codec: UpstreamChatCodec,
  resp: UpstreamResponse,
  isSse: boolean,
  extra: OutgoingHttpHeaders,
): Promise<void> {
  const encoder = t.decoded.streamEncoder(t.modelCode);
  exchange.startStream(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...extra });
  const res = ctx.res;
  let firstByteAt: bigint | undefined;
  let final: string | undefined;
  let failed: string | undefined;
  const decoder = codec.streamDecoder();
  const kept: IrStreamPart[] | undefined = t.keep ? [] : undefined;
  const emit = (parts: IrStreamPart[]) => {
    kept?.push(...parts);
    let out = '';
    for (const p of parts) {
      if (p.type === 'finish') final = encoder.encode(p);
      else if (p.type === 'error') failed = encoder.encode(p);
      else out += encoder.encode(p);
    }
    return out;
  };
  const write = async (text: string) => {
    if (text === '' || ctx.signal.aborted) return;
    firstByteAt ??= process.hrtime.bigint();
    coalesce(res);
    if (!res.write(text)) await drained(res, ctx.signal);
  };
  let error: unknown;
  let whole: IrResponse | undefined;
  try {
    if (!isSse) {
      whole = codec.decode(await resp.body.json());
      await write(emit(partsOf(whole)));
    } else {
      const pending: IrStreamPart[] = [];
      const parser = new SseParser((event, data) => pending.push(...decoder.event(event, data)));
      for await (const chunk of resp.body as AsyncIterable<Buffer>) {
        if (ctx.signal.aborted && !t.drain) break;
        if (decoder.bytes) pending.push(...decoder.bytes(chunk));
        else parser.push(chunk);
        await write(emit(pending.splice(0)));
        if (decoder.done) break;
      }
      parser.end();
      await write(emit(pending.splice(0)));
    }
  } catch (err) {
    error = err;
  }
  exchange.firstByte(firstByteAt);
  const usage = whole ? whole.usage : decoder.reported;
  if (final !== undefined && usage) exchange.usage(usage, true, 0);
  else exchange.usage(usage, false, decoder.outputBytes);
  if (ctx.signal.aborted) return exchange.cancelled();
  if (failed !== undefined) return exchange.endStream('upstream_error', failed);
  if (final === undefined) {
    const reason = error instanceof Error ? error.message : 'the upstream ended the stream early';
    return exchange.endStream('upstream_error', encoder.encode({ type: 'error', message: `upstream stream failed: ${reason}` }));
  }
  if (kept) {
    const start = kept.find((p) => p.type === 'start');
    await keepAnswer(ctx, t, answerOf(kept), start?.type === 'start' ? start.id : '');
  }
  return exchange.endStream('ok', final);
}
