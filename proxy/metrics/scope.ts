import { AsyncLocalStorage } from 'node:async_hooks';
import type { GenAiMetrics } from './genai.js';
import type { Traced, Tracing } from './tracing.js';

/** The usage and settlement of a chat request, as billing settled it (structurally billing's ChatSettlement). */
export interface SettledChat {
  usage: { inputTokens: number; cachedInputTokens: number; outputTokens: number; reasoningTokens: number } | null;
  usageSource: 'reported' | 'estimated';
  status: 'ok' | 'upstream_error' | 'cancelled' | 'failed';
  httpStatus: number;
  latencyMs: number;
  ttftMs?: number;
}

/** What one API request has told telemetry so far. Lives in an AsyncLocalStorage for the request's duration. */
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

export const scopes = new AsyncLocalStorage<RequestScope>();
