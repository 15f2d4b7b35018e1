import { isAscii } from 'node:buffer';
/**
 * Token usage in neutral form, as the upstream reported it (or as estimated): inputTokens counts
 * every input token including cache reads and cache writes; cachedInputTokens is the cache-read
 * part, cacheWriteTokens the cache-write part; reasoningTokens is part of outputTokens.
 */
export interface Usage {
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  /** Part of outputTokens spent on reasoning (already included in outputTokens). */
  reasoningTokens: number;
}

export type UsageSource = 'reported' | 'estimated';

/**
 * Input tokens a request body may hold, erring high: a hold must cover the real count. English
 * and code run about 4 bytes a token; other scripts take 2-3 UTF-8 bytes a character and up to
 * a token or two a character, so every non-ASCII byte counts as two thirds of a token.
 */
export function holdInputTokens(body: Buffer): number {
  if (isAscii(body)) return Math.ceil(body.length / 4);
  let nonAscii = 0;
  for (let i = 0; i < body.length; i++) if (body[i]! >= 0x80) nonAscii++;
  return Math.ceil((body.length - nonAscii) / 4 + (nonAscii * 2) / 3);
}

/** Rough token count of text bytes (about 4 bytes a token for English and code). */
export function estimateTokens(bytes: number): number {
  return bytes <= 0 ? 0 : Math.ceil(bytes / 4);
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);
export { num as tokenCount };
