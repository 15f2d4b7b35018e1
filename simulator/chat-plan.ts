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
  /** The request allows more than one call per turn (parallel_tool_calls, disable_parallel_tool_use). */
  parallel: boolean;
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
  /** The calls of this turn, in order (several when `[sim:tool=N]` asks and the request allows it). */
  tools: ToolCall[];
  /** Output tokens: one per word of reasoning and text, plus the argument pieces. */
  outputTokens: number;
  reasoningTokens: number;
}

/**
 * Calls when the request forces one, or when `[sim:tool]` / `[sim:tool=N]` asks and tools are
 * given: N calls in one turn (the given tools in turn, or the forced one N times) unless the
 * request turned parallel calls off.
 */
export function planAnswer(p: PlanInput): Plan {
  const reasoning = p.reasoning ? answerWords(`think:${p.prompt}`, 6) : [];
  const calls: ToolCall[] = [];
  const wanted = p.directives.tool || (p.forced !== undefined ? 1 : 0);
  if (p.tools.length > 0 && wanted > 0 && !p.afterToolResult) {
    const forced = p.tools.find((t) => t.name === p.forced);
    for (let i = 0; i < (p.parallel ? wanted : 1); i++) {
      const spec = forced ?? p.tools[i % p.tools.length]!;
      const args = JSON.stringify(argumentsFor(spec.schema, p.prompt));
      calls.push({ id: simId(''), name: spec.name, arguments: args, pieces: split(args, 3) });
    }
  }
  const text = calls.length ? [] : answerWords(p.prompt, p.directives.tokens);
  const reasoningTokens = reasoning.length;
  const pieces = calls.reduce((n, c) => n + c.pieces.length, 0);
  return { reasoning, text, tools: calls, reasoningTokens, outputTokens: reasoningTokens + text.length + pieces };
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
      // The user's own words: without directives, and without the context blocks that agents
      // put in the user turn (Claude Code's <system-reminder>, Codex's <environment_context>).
      return (
        prompt
          .replace(/<([a-z_-]+)>[\s\S]*?<\/\1>/g, '')
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
