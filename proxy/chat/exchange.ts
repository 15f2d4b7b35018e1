import type { OutgoingHttpHeaders } from 'node:http';
import type { ChatCharge, ChatSettlement } from '../billing/index.js';
import type { RequestContext } from '../http/context.js';
import { estimateTokens, type Usage } from '../ir/usage.js';
import { holdHead, uncork } from './relay.js';

/**
 * One chat request after its hold, as an explicit state machine:
 *
 *   held -> sent (an upstream call is under way) -> streaming (the head is out) -> settled
 *
 * Every way to give the client its final bytes goes through answer() or endStream(), which
 * settle first; close() settles whatever path was taken otherwise (client gone, 502/504, a
 * throw). So "settled exactly once, before the final bytes" holds by construction, not by each
 * branch remembering it.
 */
export type ExchangeState = 'held' | 'sent' | 'streaming' | 'settled';

export class ChatExchange {
  private phase: ExchangeState = 'held';
  private settling: Promise<void> | undefined;
  private readonly outcome: ChatSettlement;

  constructor(
    private readonly ctx: RequestContext,
    private readonly charge: ChatCharge,
    /** Input tokens estimated from the request body: the basis when no usage is reported. */
    readonly estimatedInputTokens: number,
    /** The output tokens the hold was sized for (the cap the upstream was sent, times n): no estimate exceeds it. */
    private readonly outputCap: number,
    firstUpstreamModel: string,
    /** Told the usage once the charge is settled (the key's tokens-per-minute window). */
    private readonly onSettled: (usage: Usage) => void = () => {},
  ) {
    this.outcome = { usage: null, usageSource: 'reported', status: 'failed', httpStatus: 500, upstreamModel: firstUpstreamModel, latencyMs: 0 };
  }

  /** A transition from a state it does not follow is a bug in the chat path: stop it before bytes go out twice. */
  private expect(action: string, ...from: ExchangeState[]): void {
    if (!from.includes(this.phase)) throw new Error(`chat exchange: ${action} while ${this.phase}`);
  }

  /** An upstream call to this backend model is under way (failover may call again). */
  sent(upstreamModel: string): void {
    this.expect('an upstream call', 'held', 'sent');
    this.outcome.upstreamModel = upstreamModel;
    this.phase = 'sent';
  }

  /** The upstream's usage when it reported one; else an estimate from the input and `outputBytes`. */
  usage(reported: Usage | null, final: boolean, outputBytes: number): void {
    if (reported && final) {
      this.outcome.usage = reported;
      this.outcome.usageSource = 'reported';
      return;
    }
    // Reported parts win (e.g. message_start's input tokens); missing parts are estimated. The
    // upstream was sent the cap, so it cannot have made more: bytes over 4 a token (short words)
    // would otherwise charge a client that left near the end more than the whole answer, and
    // more than its hold.
    const output = Math.min(estimateTokens(outputBytes), this.outputCap);
    this.outcome.usage = reported
      ? { ...reported, inputTokens: reported.inputTokens || this.estimatedInputTokens, outputTokens: Math.max(reported.outputTokens, output) }
      : { inputTokens: this.estimatedInputTokens, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: output, reasoningTokens: 0 };
    this.outcome.usageSource = 'estimated';
  }

  /** A whole answer (JSON or an upstream error): charged, then sent. */
  async answer(status: number, kind: 'ok' | 'upstream_error', headers: OutgoingHttpHeaders, bytes: Buffer): Promise<void> {
    this.expect('a whole answer', 'sent');
    this.outcome.status = kind;
    this.outcome.httpStatus = status;
    await this.settle();
    this.ctx.res.writeHead(status, { ...headers, 'content-length': String(bytes.length) });
    this.ctx.res.end(bytes);
  }

  /** The head of a streamed answer goes out with its first events (or alone, if they are slow to come). */
  startStream(status: number, headers: OutgoingHttpHeaders): void {
    this.expect('a stream', 'sent');
    this.ctx.res.writeHead(status, headers);
    holdHead(this.ctx.res);
    this.outcome.httpStatus = status;
    this.phase = 'streaming';
  }

  /** The client saw its first streamed byte at `at` (hrtime), or now when the stream arrived whole. */
  firstByte(at: bigint | undefined): void {
    this.outcome.ttftMs = Number((at ?? process.hrtime.bigint()) - this.ctx.startedAt) / 1e6;
  }

  /** The end of a stream: charged, then the held final events (or the protocol's error event) sent. */
  async endStream(kind: 'ok' | 'upstream_error', finalBytes: Buffer | string | undefined): Promise<void> {
    this.expect("a stream's end", 'streaming');
    this.outcome.status = kind;
    await this.settle();
    uncork(this.ctx.res);
    this.ctx.res.end(finalBytes);
  }

  /** The client went away: nothing more is sent; close() charges what was used. */
  cancelled(): void {
    this.outcome.status = 'cancelled';
    this.outcome.httpStatus = 499;
  }

  /** No upstream could answer: the caller throws the error the client gets; close() releases the hold. */
  unavailable(httpStatus: number): void {
    this.outcome.status = 'upstream_error';
    this.outcome.httpStatus = httpStatus;
  }

  /** Settles whatever has not been settled. Errors of settlement are logged, never shown to a client that has its answer. */
  async close(): Promise<void> {
    await this.settle().catch((err: Error) => this.ctx.log.error('settlement failed', { requestId: this.ctx.requestId, error: err.message }));
  }

  private settle(): Promise<void> {
    this.settling ??= (async () => {
      this.outcome.latencyMs = Number(process.hrtime.bigint() - this.ctx.startedAt) / 1e6;
      await this.charge.settle(this.outcome);
      this.phase = 'settled';
      if (this.outcome.usage) this.onSettled(this.outcome.usage);
    })();
    return this.settling;
  }
}
