import type { RequestScope } from '../metrics/scope.js';
import type { Prices } from '../config/runtime.js';
import type { ChatProtocol } from '../ir/protocol.js';
import type { Usage } from '../ir/usage.js';

export type { ChatProtocol, Usage };

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
  /** The request's telemetry (billing itself ignores it; the gateway's observed billing reports into it). */
  scope?: RequestScope | undefined;
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
  /**
   * Throws insufficient_credits (402) when the account has no credits available at all: the
   * contract answers that before a restricted client (403) or an unknown model (404), whose exact
   * hold would need the model's price. Optional: a billing without accounts admits everything.
   */
  checkAvailable?(account: string): Promise<void>;
  /**
   * Resolves once the charges this replica has answered for are in the store's books (a journal
   * writes them behind its answers): readers of balances and usage call it first. Optional: a
   * billing that commits on the request's path is always current.
   */
  booksCurrent?(): Promise<void>;
  /** Releases in-memory leases and flushes pending writes (shutdown). */
  close(): Promise<void>;
}
