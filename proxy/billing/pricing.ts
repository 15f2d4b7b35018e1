import { divCeil } from '../../api/snapshot/money.js';
import type { Prices } from '../config/runtime.js';
import type { Usage } from './types.js';

/**
 * Chat prices are micro-credits per million tokens, already multiplied by the group's
 * priceMultiplier (or overridden) when the snapshot was compiled; these functions only apply
 * them. Each sums the exact products first and divides by a million once, rounding up, so a
 * request is never rounded down to free and the error is below one micro-credit per request.
 * Pure: no I/O, no floating point.
 */

const PER = 1_000_000n;
const n = (tokens: number): bigint => BigInt(Math.max(0, Math.floor(tokens)));

/** What a chat request holds: estimated input x input price + max output x output price. */
export function chatHold(prices: Prices, estimatedInputTokens: number, maxOutputTokens: number): bigint {
  return divCeil(n(estimatedInputTokens) * prices.inputPerMillion + n(maxOutputTokens) * prices.outputPerMillion, PER);
}

/**
 * What a chat request costs. Input tokens that were cache reads pay the cached-input price
 * (toPrices falls back to the input price when a route sets none); the rest of the input,
 * cache writes included, pays the input price. Output tokens include reasoning tokens.
 */
export function chatCost(prices: Prices, usage: Usage): bigint {
  const input = n(usage.inputTokens);
  const cached = n(usage.cachedInputTokens) < input ? n(usage.cachedInputTokens) : input;
  return divCeil((input - cached) * prices.inputPerMillion + cached * prices.cachedInputPerMillion + n(usage.outputTokens) * prices.outputPerMillion, PER);
}
