import type { IrRequest } from '../ir/chat.js';
import type { Json } from '../ir/json.js';

/** Thinking tokens a Claude model is given for each reasoning effort. */
const CLAUDE_BUDGET: Record<string, number> = { minimal: 1024, low: 2048, medium: 8192, high: 24576 };

/**
 * Claude's `thinking` for the IR's reasoning (Anthropic Messages, Vertex and Bedrock alike). Its
 * budget must be at least 1024 and below max_tokens: an effort's budget over the cap thinks within
 * the cap (Codex asks for medium effort with no cap of its own, and waits for a reasoning item that
 * would never come), and under 1025 tokens there is no thinking at all.
 */
export function claudeThinking(reasoning: IrRequest['reasoning'], maxTokens: number): Json | undefined {
  if (!reasoning) return undefined;
  const budget = Math.min(reasoning.budgetTokens ?? CLAUDE_BUDGET[reasoning.effort ?? 'medium']!, maxTokens - 1);
  return budget >= 1024 ? { type: 'enabled', budget_tokens: budget } : undefined;
}
