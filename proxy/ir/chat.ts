import type { Usage } from './usage.js';

/**
 * The neutral chat representation: what a client asked and what a model answered, whatever the
 * wire. Client protocols decode into it and encode out of it (proxy/protocols/*); upstream
 * providers encode requests from it and decode answers into it (proxy/upstreams/*). Passthrough
 * (client protocol = upstream protocol) skips it. Opaque carriers (Anthropic thinking
 * signatures, redacted thinking) travel untouched so a conversation can go back to the provider
 * that made them.
 */

/** An image, by URL (a data: URL included) or inline. */
export type IrImage = { type: 'image'; url: string } | { type: 'image'; data: string; mediaType: string };

export type IrPart = (
  | { type: 'text'; text: string }
  | IrImage
  /** A file for the model to read (a PDF, say), inline or by URL, with the name the client gave it. */
  | { type: 'document'; data: string; mediaType: string; filename?: string }
  | { type: 'document'; url: string; filename?: string }
  | { type: 'tool_call'; id: string; name: string; arguments: string }
  /** A tool's result: its text, and the images it returned (a screenshot, an image file read), which not every wire takes inside a result. */
  | { type: 'tool_result'; callId: string; content: string; images?: IrImage[]; isError?: boolean }
  | { type: 'reasoning'; text: string; signature?: string }
  | { type: 'redacted_reasoning'; data: string }
) & {
  /** An Anthropic-style cache breakpoint after this part: the prompt up to here is worth caching. */
  cache?: true;
};

export interface IrMessage {
  role: 'user' | 'assistant';
  content: IrPart[];
}

export interface IrTool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
  /** A cache breakpoint after this tool (the tools up to here are worth caching). */
  cache?: true;
}

export type IrToolChoice = { type: 'auto' } | { type: 'none' } | { type: 'required' } | { type: 'tool'; name: string };

export interface IrRequest {
  /** System and developer instructions, in order (a system message in mid-conversation included, where it stood). */
  system: string[];
  /** A cache breakpoint after the instructions. */
  cacheSystem?: true;
  messages: IrMessage[];
  tools: IrTool[];
  toolChoice?: IrToolChoice;
  parallelToolCalls?: boolean;
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
  stream: boolean;
  /** Reasoning asked for: an effort, a thinking budget, or both. */
  reasoning?: { effort?: 'minimal' | 'low' | 'medium' | 'high'; budgetTokens?: number };
  /** A JSON-schema (or plain JSON) answer format. */
  responseFormat?: { type: 'json_object' } | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict?: boolean };
  /** An end-user identifier for the provider's abuse monitoring. */
  user?: string;
}

/** Why the model stopped: the unified reason and the provider's own word. */
export interface IrFinish {
  reason: 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'error' | 'other';
  raw: string;
}

/** A provider's finish reason through its table of unified reasons; an unknown one is 'other', the raw word kept. */
export function finishFrom(table: Record<string, IrFinish['reason']>, raw: unknown): IrFinish {
  const r = typeof raw === 'string' ? raw : '';
  return { reason: table[r] ?? 'other', raw: r };
}

export interface IrResponse {
  id: string;
  content: IrPart[];
  finish: IrFinish;
  usage: Usage;
}

/** One piece of a streamed answer. Indexes number the blocks of the answer in order. */
export type IrStreamPart =
  | { type: 'start'; id: string }
  | { type: 'text'; index: number; delta: string }
  | { type: 'reasoning'; index: number; delta: string }
  | { type: 'reasoning_signature'; index: number; signature: string }
  | { type: 'tool_call_start'; index: number; id: string; name: string }
  | { type: 'tool_call_delta'; index: number; arguments: string }
  | { type: 'block_end'; index: number }
  | { type: 'finish'; finish: IrFinish; usage: Usage }
  | { type: 'error'; message: string; errorType?: string };

/** A request field that the target protocol cannot carry: refused (it changes what the model does) or dropped (a hint). */
export interface IrFieldFate {
  field: string;
  fate: 'refused' | 'dropped';
  why: string;
}

/** What translation does with a request field the IR does not carry, and the values that ask for nothing (n: 1). */
export interface FieldRule {
  fate: 'refused' | 'dropped';
  why: string;
  harmless?: (value: unknown) => boolean;
}

/** The fate of every field of `body` that is not mapped: its rule's, else dropped as `unknown`. */
export function fatesOf(body: Record<string, unknown>, mapped: ReadonlySet<string>, rules: Record<string, FieldRule>, unknown: string): IrFieldFate[] {
  const out: IrFieldFate[] = [];
  for (const [field, value] of Object.entries(body)) {
    if (mapped.has(field) || value === null || value === undefined) continue;
    const rule = rules[field];
    if (rule?.harmless?.(value)) continue;
    out.push({ field, fate: rule?.fate ?? 'dropped', why: rule?.why ?? unknown });
  }
  return out;
}

export class TranslationError extends Error {
  override name = 'TranslationError';
  constructor(
    message: string,
    readonly param?: string,
  ) {
    super(message);
  }
}

export const emptyUsage = (): Usage => ({ inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 });
