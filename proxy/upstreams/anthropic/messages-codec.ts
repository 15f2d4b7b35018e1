import { emptyUsage, finishFrom, type IrFinish, type IrPart, type IrRequest, type IrResponse, type IrStreamPart } from '../../ir/chat.js';
import { eventObject, isObj, str, type Json } from '../../ir/json.js';
import type { Usage } from '../../ir/usage.js';
import { usageFromMessages } from '../../ir/wire-usage.js';
import { claudeThinking } from '../thinking.js';
import { instructionsWithFormat, pushTurn } from '../turns.js';

/**
 * An upstream that speaks Anthropic Messages, reached through the IR (the openai SDK or Codex on
 * a Claude model): the request encoded for it, its answer (JSON or SSE) decoded.
 */

function argsObject(args: string): unknown {
  try {
    const v = JSON.parse(args || '{}') as unknown;
    return isObj(v) ? v : { _raw: args };
  } catch {
    return { _raw: args };
  }
}

const EPHEMERAL = { type: 'ephemeral' };

/** A part as a content block, with its cache breakpoint. */
function block(p: IrPart): Json | undefined {
  const b = bare(p);
  return b && p.cache ? { ...b, cache_control: EPHEMERAL } : b;
}

function bare(p: IrPart): Json | undefined {
  switch (p.type) {
    case 'text':
      return p.text === '' ? undefined : { type: 'text', text: p.text };
    case 'image':
      return { type: 'image', source: 'url' in p ? { type: 'url', url: p.url } : { type: 'base64', media_type: p.mediaType, data: p.data } };
    case 'document':
      return {
        type: 'document',
        source: 'url' in p ? { type: 'url', url: p.url } : { type: 'base64', media_type: p.mediaType, data: p.data },
        ...(p.filename ? { title: p.filename } : {}),
      };
    case 'tool_call':
      return { type: 'tool_use', id: p.id, name: p.name, input: argsObject(p.arguments) };
    case 'tool_result': {
      const content = p.images?.length ? [...(p.content ? [{ type: 'text', text: p.content }] : []), ...p.images.map((i) => bare(i)!)] : p.content;
      return { type: 'tool_result', tool_use_id: p.callId, content, ...(p.isError ? { is_error: true } : {}) };
    }
    case 'reasoning':
      // Thinking goes back only with the signature Anthropic gave it; another model's is not valid here.
      return p.signature ? { type: 'thinking', thinking: p.text, signature: p.signature } : undefined;
    case 'redacted_reasoning':
      return { type: 'redacted_thinking', data: p.data };
  }
}

/** The request body for `model`; `maxTokens` is the cap the hold was sized for (Anthropic requires one). */
export function encodeMessagesRequest(ir: IrRequest, model: string, maxTokens: number): Json {
  const messages: Json[] = [];
  for (const m of ir.messages) {
    pushTurn(
      messages,
      m.role,
      m.content.flatMap((p): Json[] => {
        const b = block(p);
        return b ? [b] : [];
      }),
    );
  }
  const system = instructionsWithFormat(ir);
  const thinking = claudeThinking(ir.reasoning, maxTokens);
  const tc = ir.toolChoice;
  const noParallel = ir.parallelToolCalls === false ? { disable_parallel_tool_use: true } : {};
  return {
    model,
    max_tokens: maxTokens,
    ...(system.length ? { system: ir.cacheSystem ? [{ type: 'text', text: system.join('\n\n'), cache_control: EPHEMERAL }] : system.join('\n\n') } : {}),
    messages,
    ...(ir.tools.length
      ? {
          tools: ir.tools.map((t) => ({
            name: t.name,
            ...(t.description !== undefined ? { description: t.description } : {}),
            input_schema: t.parameters,
            ...(t.cache ? { cache_control: EPHEMERAL } : {}),
          })),
        }
      : {}),
    ...(tc && ir.tools.length
      ? {
          tool_choice:
            tc.type === 'tool'
              ? { type: 'tool', name: tc.name, ...noParallel }
              : tc.type === 'required'
                ? { type: 'any', ...noParallel }
                : tc.type === 'none'
                  ? { type: 'none' }
                  : { type: 'auto', ...noParallel },
        }
      : ir.tools.length && ir.parallelToolCalls === false
        ? { tool_choice: { type: 'auto', disable_parallel_tool_use: true } }
        : {}),
    // With thinking on, Anthropic takes no temperature other than 1; otherwise 0-1, where the
    // OpenAI protocols take 0-2 (a temperature over 1 asks for more randomness than the default,
    // and 1 is Anthropic's most).
    ...(ir.temperature !== undefined && !thinking ? { temperature: Math.min(ir.temperature, 1) } : {}),
    ...(ir.topP !== undefined && !thinking ? { top_p: ir.topP } : {}),
    ...(ir.stop?.length ? { stop_sequences: ir.stop } : {}),
    ...(thinking ? { thinking } : {}),
    ...(ir.user ? { metadata: { user_id: ir.user } } : {}),
    stream: ir.stream,
  };
}

const FINISH: Record<string, IrFinish['reason']> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};
const finishOf = (raw: unknown): IrFinish => finishFrom(FINISH, raw);

/** A whole Messages answer as the IR. */
export function decodeMessagesResponse(body: unknown): IrResponse {
  const b = isObj(body) ? body : {};
  const content: IrPart[] = [];
  for (const c of Array.isArray(b.content) ? (b.content as unknown[]) : []) {
    if (!isObj(c)) continue;
    if (c.type === 'text') content.push({ type: 'text', text: str(c.text) ?? '' });
    else if (c.type === 'thinking')
      content.push({ type: 'reasoning', text: str(c.thinking) ?? '', ...(str(c.signature) ? { signature: str(c.signature)! } : {}) });
    else if (c.type === 'redacted_thinking') content.push({ type: 'redacted_reasoning', data: str(c.data) ?? '' });
    else if (c.type === 'tool_use') content.push({ type: 'tool_call', id: str(c.id) ?? '', name: str(c.name) ?? '', arguments: JSON.stringify(c.input ?? {}) });
  }
  return { id: str(b.id) ?? `gw${Date.now().toString(36)}`, content, finish: finishOf(b.stop_reason), usage: usageFromMessages(b.usage) ?? emptyUsage() };
}

/** A Messages SSE stream as IR parts. Anthropic's block indexes are the IR's. */
export class MessagesStreamDecoder {
  private usage: Usage | null = null;
  private stopRaw: unknown;
  done = false;
  outputBytes = 0;

  get reported(): Usage | null {
    return this.usage;
  }

  get finished(): boolean {
    return this.done && this.stopRaw !== undefined;
  }

  event(event: string, data: string): IrStreamPart[] {
    if (this.done) return [];
    const j = eventObject(data);
    if (!j) return [];
    const type = str(j.type) ?? event;
    switch (type) {
      case 'message_start': {
        const m = isObj(j.message) ? j.message : {};
        this.usage = usageFromMessages(m.usage, this.usage);
        return [{ type: 'start', id: str(m.id) ?? `gw${Date.now().toString(36)}` }];
      }
      case 'content_block_start': {
        const index = typeof j.index === 'number' ? j.index : 0;
        const b = isObj(j.content_block) ? j.content_block : {};
        if (b.type === 'tool_use') return [{ type: 'tool_call_start', index, id: str(b.id) ?? `toolu_${index}`, name: str(b.name) ?? '' }];
        if (b.type === 'text' && str(b.text)) return [{ type: 'text', index, delta: b.text as string }];
        return [];
      }
      case 'content_block_delta': {
        const index = typeof j.index === 'number' ? j.index : 0;
        const d = isObj(j.delta) ? j.delta : {};
        if (d.type === 'text_delta' && typeof d.text === 'string') {
          this.outputBytes += d.text.length;
          return [{ type: 'text', index, delta: d.text }];
        }
        if (d.type === 'thinking_delta' && typeof d.thinking === 'string') {
          this.outputBytes += d.thinking.length;
          return [{ type: 'reasoning', index, delta: d.thinking }];
        }
        if (d.type === 'signature_delta' && typeof d.signature === 'string') return [{ type: 'reasoning_signature', index, signature: d.signature }];
        if (d.type === 'input_json_delta' && typeof d.partial_json === 'string') {
          this.outputBytes += d.partial_json.length;
          return d.partial_json ? [{ type: 'tool_call_delta', index, arguments: d.partial_json }] : [];
        }
        return [];
      }
      case 'content_block_stop':
        return [{ type: 'block_end', index: typeof j.index === 'number' ? j.index : 0 }];
      case 'message_delta': {
        this.usage = usageFromMessages(j.usage, this.usage);
        if (isObj(j.delta) && j.delta.stop_reason !== undefined && j.delta.stop_reason !== null) this.stopRaw = j.delta.stop_reason;
        return [];
      }
      case 'message_stop':
        return this.finish();
      case 'error': {
        this.done = true;
        const e = isObj(j.error) ? j.error : {};
        return [{ type: 'error', message: str(e.message) ?? 'upstream error', ...(str(e.type) ? { errorType: str(e.type)! } : {}) }];
      }
      default:
        return [];
    }
  }

  finish(): IrStreamPart[] {
    if (this.done) return [];
    this.done = true;
    return [{ type: 'finish', finish: finishOf(this.stopRaw), usage: this.usage ?? emptyUsage() }];
  }
}
