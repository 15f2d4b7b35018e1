import { tokenCount, type Usage } from './usage.js';

/**
 * Each wire's usage object in IR terms: where client protocols (taps of passthrough, encoders of
 * translation) and upstream decoders meet, so the mapping exists once.
 */

const obj = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/** OpenAI Chat Completions: prompt_tokens counts the cached part too. */
export function usageFromChat(u: unknown): Usage | null {
  const o = obj(u);
  if (!o) return null;
  const input = tokenCount(o.prompt_tokens);
  const output = tokenCount(o.completion_tokens);
  return {
    inputTokens: input,
    cachedInputTokens: Math.min(input, tokenCount(obj(o.prompt_tokens_details)?.cached_tokens)),
    cacheWriteTokens: 0,
    outputTokens: output,
    reasoningTokens: Math.min(output, tokenCount(obj(o.completion_tokens_details)?.reasoning_tokens)),
  };
}

/** OpenAI Responses: input_tokens counts the cached part too. */
export function usageFromResponses(u: unknown): Usage | null {
  const o = obj(u);
  if (!o) return null;
  const input = tokenCount(o.input_tokens);
  const output = tokenCount(o.output_tokens);
  return {
    inputTokens: input,
    cachedInputTokens: Math.min(input, tokenCount(obj(o.input_tokens_details)?.cached_tokens)),
    cacheWriteTokens: 0,
    outputTokens: output,
    reasoningTokens: Math.min(output, tokenCount(obj(o.output_tokens_details)?.reasoning_tokens)),
  };
}

/**
 * Anthropic Messages reports input_tokens without the cache parts; Usage.inputTokens counts them
 * all. A later report (message_delta) updates only the fields it carries.
 */
export function usageFromMessages(u: unknown, prev: Usage | null = null): Usage | null {
  const o = obj(u);
  if (!o) return prev;
  const pick = (k: string, p: number) => (o[k] === undefined || o[k] === null ? p : tokenCount(o[k]));
  const prevPlain = prev ? prev.inputTokens - prev.cachedInputTokens - prev.cacheWriteTokens : 0;
  const plain = pick('input_tokens', prevPlain);
  const read = pick('cache_read_input_tokens', prev?.cachedInputTokens ?? 0);
  const write = pick('cache_creation_input_tokens', prev?.cacheWriteTokens ?? 0);
  return {
    inputTokens: plain + read + write,
    cachedInputTokens: read,
    cacheWriteTokens: write,
    outputTokens: pick('output_tokens', prev?.outputTokens ?? 0),
    reasoningTokens: 0,
  };
}

/** IR usage in each wire's shape (what a translated answer reports to its client). */
export function chatUsageOf(u: Usage) {
  return {
    prompt_tokens: u.inputTokens,
    completion_tokens: u.outputTokens,
    total_tokens: u.inputTokens + u.outputTokens,
    prompt_tokens_details: { cached_tokens: u.cachedInputTokens },
    completion_tokens_details: { reasoning_tokens: u.reasoningTokens },
  };
}

export function messagesUsageOf(u: Usage) {
  return {
    input_tokens: u.inputTokens - u.cachedInputTokens - u.cacheWriteTokens,
    cache_creation_input_tokens: u.cacheWriteTokens,
    cache_read_input_tokens: u.cachedInputTokens,
    output_tokens: u.outputTokens,
  };
}
