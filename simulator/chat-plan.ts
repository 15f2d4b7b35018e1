import type { Directives } from './directives.js';
import { answerWords, countInputTokens, simId } from './text.js';

/**
 * What a simulated model answers, decided once and protocol-neutrally; each protocol's module
 * only encodes the plan in its own wire format. Deterministic: the same request gives the same
 * plan, so tests compare what the client received with what the simulator sent.
 */
export interface ToolSpec {
  name: string;
  schema: unknown;
}

export interface PlanInput {
  /** Text of the last user turn (directives are read from it). */
  prompt: string;
  directives: Directives;
  tools: ToolSpec[];
  /** The tool the request forces (tool_choice), '*' for "any tool", undefined for auto/none. */
  forced: string | undefined;
  /** The last turn answers a tool call: reply in text, never call again. */
  afterToolResult: boolean;
  /** Reasoning / thinking was asked for. */
  reasoning: boolean;
}

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as a JSON text, and the pieces it is streamed in. */
  arguments: string;
  pieces: string[];
}

export interface Plan {
  reasoning: string[];
  text: string[];
  tool: ToolCall | undefined;
  /** Output tokens: one per word of reasoning and text, plus the argument pieces. */
  outputTokens: number;
  reasoningTokens: number;
}

/** A call when the request forces one, or when `[sim:tool]` asks for one and tools are given. */
export function planAnswer(p: PlanInput): Plan {
  const reasoning = p.reasoning ? answerWords(`think:${p.prompt}`, 6) : [];
  let tool: ToolCall | undefined;
  const wantsTool = p.forced !== undefined || p.directives.tool;
  if (p.tools.length > 0 && wantsTool && !p.afterToolResult) {
    const spec = p.tools.find((t) => t.name === p.forced) ?? p.tools[0]!;
    const args = JSON.stringify(argumentsFor(spec.schema, p.prompt));
    tool = { id: simId(''), name: spec.name, arguments: args, pieces: split(args, 3) };
  }
  const text = tool ? [] : answerWords(p.prompt, p.directives.tokens);
  const reasoningTokens = reasoning.length;
  return { reasoning, text, tool, reasoningTokens, outputTokens: reasoningTokens + text.length + (tool ? tool.pieces.length : 0) };
}

/** Arguments that satisfy a JSON schema's required properties (all properties when none are required). */
export function argumentsFor(schema: unknown, prompt: string): Record<string, unknown> {
  const s = (schema ?? {}) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  const props = s.properties ?? {};
  const names = s.required?.length ? s.required : Object.keys(props);
  const out: Record<string, unknown> = {};
  for (const name of names) out[name] = valueFor(props[name] ?? {}, prompt);
  return out;
}

function valueFor(p: Record<string, unknown>, prompt: string): unknown {
  if (Array.isArray(p.enum) && p.enum.length) return p.enum[0];
  const type: unknown = Array.isArray(p.type) ? p.type[0] : p.type;
  switch (type) {
    case 'integer':
    case 'number':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return [];
    case 'object':
      return argumentsFor(p, prompt);
    default:
      return (
        prompt
          .replace(/\[sim:[^\]]*\]/g, '')
          .trim()
          .slice(0, 40) || 'sim'
      );
  }
}

function split(s: string, n: number): string[] {
  const size = Math.max(1, Math.ceil(s.length / n));
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

/**
 * Prompt caching as the providers do it: a prefix (system, tools, earlier turns) seen before is
 * read from the cache; seen for the first time, it is written (Anthropic reports the write).
 */
const caches = new WeakMap<object, Set<string>>();
export function cachePrefix(owner: object, prefix: string): { tokens: number; hit: boolean } {
  if (!prefix) return { tokens: 0, hit: false };
  let seen = caches.get(owner);
  if (!seen) caches.set(owner, (seen = new Set()));
  const hit = seen.has(prefix);
  if (!hit) {
    seen.add(prefix);
    if (seen.size > 10_000) seen.clear();
  }
  return { tokens: countInputTokens(prefix), hit };
}
