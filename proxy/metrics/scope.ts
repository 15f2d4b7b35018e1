import type { GenAiMetrics } from './genai.js';
import type { Traced } from './spans.js';
import type { Tracing } from './tracing.js';

/** The usage and settlement of a chat request, as billing settled it (structurally billing's ChatSettlement). */
export interface SettledChat {
  usage: { inputTokens: number; cachedInputTokens: number; outputTokens: number; reasoningTokens: number } | null;
  usageSource: 'reported' | 'estimated';
  status: 'ok' | 'upstream_error' | 'cancelled' | 'failed';
  httpStatus: number;
  latencyMs: number;
  ttftMs?: number;
}

/**
 * What one API request has told telemetry so far. The request carries it (RequestContext.scope)
 * and hands it to what reports: an AsyncLocalStorage would cost every promise of every request
 * a hook on Node 20 (about a fifth of the chat path's CPU).
 */
export interface RequestScope {
  readonly telemetry: { readonly metrics: GenAiMetrics; readonly tracing?: Tracing | undefined };
  readonly requestId: string;
  /** Set once credits are held: the model code, group and client protocol (all from the config or a closed list). */
  chat?: { model: string; group: string; protocol: string };
  /** The backend of the latest upstream call. */
  backend?: { label: string; provider: string };
  attempts: number;
  settled?: SettledChat & { creditsMicro: bigint };
  /** The request's server span, when tracing is on. */
  trace?: Traced;
}
