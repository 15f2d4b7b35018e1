import type { Prices } from '../config/runtime.js';

/**
 * Token usage as the upstream reported it (or as estimated). inputTokens counts every input
 * token including cached ones; cachedInputTokens is the cache-read part of it.
 */
export interface Usage {
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  /** Part of outputTokens spent on reasoning (already included in outputTokens). */
  reasoningTokens: number;
}

export type ChatProtocol = 'chat-completions' | 'responses' | 'messages';

export interface ChatQuote {
  requestId: string;
  keyHash: string;
  keyName: string;
  account: string;
  group: string;
  model: string;
  protocol: ChatProtocol;
  prices: Prices;
  estimatedInputTokens: number;
  maxOutputTokens: number;
  spendLimitMicro?: bigint;
}

export interface ChatSettlement {
  usage: Usage | null;
  /** reported: the upstream's own numbers; estimated: ours (cancelled or cut before usage arrived). */
  usageSource: 'reported' | 'estimated';
  status: 'ok' | 'upstream_error' | 'cancelled' | 'failed';
  httpStatus: number;
  upstreamModel: string;
  latencyMs: number;
  ttftMs?: number;
}

/** An open hold for one chat request. settle() is idempotent: a second call changes nothing. */
export interface ChatCharge {
  readonly heldMicro: bigint;
  settle(outcome: ChatSettlement): Promise<void>;
}

export interface Billing {
  /** Quote and hold atomically; throws GatewayError insufficient_credits / spend_limit_reached (402). */
  holdChat(quote: ChatQuote): Promise<ChatCharge>;
  /** Releases in-memory leases and flushes pending writes (shutdown). */
  close(): Promise<void>;
}
