import type { Outcome } from './genai.js';
import type { RequestScope, SettledChat } from './scope.js';

/** What the front door knows when a response is over. */
export interface Finished {
  method: string;
  /** The route's stable name ('unmatched' when none). */
  route: string;
  status: number;
  /** The gateway error code the client was answered with, if any (a closed list). */
  errorCode?: string;
  /** The client went away before the response was finished. */
  clientGone: boolean;
  /** The key's name and group, once the key was authenticated (names from the config, never the key). */
  keyName?: string;
  group?: string;
  latencyMs: number;
  /** The trace of the request, when tracing is on. */
  traceId?: string;
}

const UPSTREAM_CODES = new Set(['upstream_unavailable', 'upstream_timeout', 'upstream_error']);

/**
 * How a request ended. A settled chat request says it itself; any other request is judged by its
 * answer: an error code of the upstream's, a refusal (4xx: the reason is the code), a failure of
 * ours (5xx), or a client that left first.
 */
export function requestOutcome(f: Finished, settled: SettledChat['status'] | undefined): { outcome: Outcome; reason: string } {
  const reason = f.errorCode ?? '';
  if (settled) return { outcome: settled, reason };
  if (f.errorCode && UPSTREAM_CODES.has(f.errorCode)) return { outcome: 'upstream_error', reason };
  if (f.clientGone) return { outcome: 'cancelled', reason };
  if (f.status >= 500) return { outcome: 'failed', reason: reason || 'http_5xx' };
  if (f.status >= 400) return { outcome: 'refused', reason: reason || `http_${f.status}` };
  return { outcome: 'ok', reason };
}

/**
 * The access-log line of one request. Names and numbers only: the key's name (never the key or
 * its hash), no body, no prompt, no header value.
 */
export function accessLine(scope: RequestScope, f: Finished, outcome: Outcome, reason: string): Record<string, unknown> {
  const s = scope.settled;
  const u = s?.usage;
  return {
    requestId: scope.requestId,
    method: f.method,
    route: f.route,
    status: f.status,
    outcome,
    ...(reason ? { reason } : {}),
    ...(f.keyName !== undefined ? { key: f.keyName } : {}),
    ...((scope.chat?.group ?? f.group) !== undefined ? { group: scope.chat?.group ?? f.group } : {}),
    ...(scope.chat ? { model: scope.chat.model, protocol: scope.chat.protocol } : {}),
    ...(scope.backend ? { backend: scope.backend.label, provider: scope.backend.provider } : {}),
    ...(scope.attempts > 1 ? { attempts: scope.attempts } : {}),
    ...(u
      ? {
          inputTokens: u.inputTokens,
          cachedInputTokens: u.cachedInputTokens,
          outputTokens: u.outputTokens,
          reasoningTokens: u.reasoningTokens,
          usageSource: s.usageSource,
        }
      : {}),
    ...(s ? { creditsMicro: s.creditsMicro.toString() } : {}),
    latencyMs: Math.round(f.latencyMs * 1000) / 1000,
    ...(s?.ttftMs !== undefined ? { ttftMs: Math.round(s.ttftMs * 1000) / 1000 } : {}),
    ...(f.traceId ? { traceId: f.traceId } : {}),
  };
}
