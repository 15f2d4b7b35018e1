import {
  fatesOf,
  TranslationError,
  type FieldRule,
  type IrFieldFate,
  type IrFinish,
  type IrImage,
  type IrMessage,
  type IrPart,
  type IrRequest,
  type IrResponse,
  type IrStreamPart,
  type IrTool,
  type IrToolChoice,
} from '../../ir/chat.js';
import { errorStatus } from '../../ir/error-status.js';
import { errorTypeFor } from '../error-types.js';
import { isObj, str, type Json } from '../../ir/json.js';
import type { Usage } from '../../ir/usage.js';
import { messagesUsageOf } from '../../ir/wire-usage.js';
import { encodeJsonEvent } from '../../sse/index.js';
import { ToolCallSequencer } from '../tool-sequence.js';

/**
 * Anthropic Messages as a client protocol in front of a backend that speaks another one (Claude
 * Code on a GPT-class model): the request decoded to the IR, the answer encoded from it.
 */

/** Fields of a Messages request that the IR does not carry, and why. */
export const MESSAGES_FATES: Record<string, FieldRule> = {
  top_k: { fate: 'dropped', why: 'a sampling hint this backend does not take' },
  context_management: { fate: 'dropped', why: 'Anthropic-side context editing' },
  service_tier: { fate: 'dropped', why: 'an Anthropic scheduling hint' },
  container: { fate: 'refused', why: 'Anthropic code-execution containers are not available from this backend' },
  mcp_servers: { fate: 'refused', why: 'remote MCP servers are not available from this backend' },
};

/** Members the decoder maps (`metadata` for its user_id, the only field it has). */
export const MESSAGES_MAPPED = [
  'model',
  'messages',
  'system',
  'max_tokens',
  'stream',
  'tools',
  'tool_choice',
  'temperature',
  'top_p',
  'stop_sequences',
  'thinking',
  'metadata',
  'output_config',
  'output_format',
] as const;
const MAPPED = new Set<string>(MESSAGES_MAPPED);

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.flatMap((b: unknown) => (isObj(b) && b.type === 'text' && typeof b.text === 'string' ? [b.text] : [])).join('\n');
}

function blocks(content: unknown, where: string, cached: { seen: boolean }): IrPart[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw new TranslationError(`${where} must be a string or an array of content blocks`, 'messages');
  return content.flatMap((b: unknown, i): IrPart[] => {
    if (!isObj(b)) throw new TranslationError(`${where}[${i}] must be an object`, 'messages');
    const parts = block(b, `${where}[${i}]`);
    if (b.cache_control !== undefined && b.cache_control !== null) {
      cached.seen = true;
      const last = parts.at(-1);
      if (last) last.cache = true;
    }
    return parts;
  });
}

function block(b: Json, at: string): IrPart[] {
  switch (b.type) {
    case 'text':
      return str(b.text) ? [{ type: 'text', text: b.text as string }] : [];
    case 'image': {
      const s = isObj(b.source) ? b.source : {};
      if (s.type === 'base64') return [{ type: 'image', mediaType: str(s.media_type) ?? 'image/png', data: str(s.data) ?? '' }];
      if (s.type === 'url') return [{ type: 'image', url: str(s.url) ?? '' }];
      throw new TranslationError(`${at}: image source type "${String(s.type)}" is not available through translation`, 'messages');
    }
    case 'tool_use':
      return [{ type: 'tool_call', id: str(b.id) ?? '', name: str(b.name) ?? '', arguments: JSON.stringify(b.input ?? {}) }];
    case 'tool_result': {
      const images = Array.isArray(b.content)
        ? (b.content as unknown[]).flatMap((c, j) => (isObj(c) && c.type === 'image' ? (block(c, `${at}.content[${j}]`) as IrImage[]) : []))
        : [];
      return [
        {
          type: 'tool_result',
          callId: str(b.tool_use_id) ?? '',
          content: textOf(b.content),
          ...(images.length ? { images } : {}),
          ...(b.is_error === true ? { isError: true } : {}),
        },
      ];
    }
    case 'thinking':
      return [{ type: 'reasoning', text: str(b.thinking) ?? '', ...(typeof b.signature === 'string' ? { signature: b.signature } : {}) }];
    case 'redacted_thinking':
      return [{ type: 'redacted_reasoning', data: str(b.data) ?? '' }];
    case 'document': {
      const s = isObj(b.source) ? b.source : {};
      const filename = str(b.title) ? { filename: b.title as string } : {};
      if (s.type === 'base64') return [{ type: 'document', mediaType: str(s.media_type) ?? 'application/pdf', data: str(s.data) ?? '', ...filename }];
      if (s.type === 'url') return [{ type: 'document', url: str(s.url) ?? '', ...filename }];
      if (s.type === 'text') return str(s.data) ? [{ type: 'text', text: s.data as string }] : [];
      throw new TranslationError(`${at}: document source type "${String(s.type)}" is not available through translation`, 'messages');
    }
    default:
      throw new TranslationError(`${at}: content block type "${String(b.type)}" is not available through translation`, 'messages');
  }
}

function toolChoiceOf(v: unknown): { choice?: IrToolChoice; parallel?: boolean } {
  if (!isObj(v)) return {};
  const parallel = v.disable_parallel_tool_use === true ? { parallel: false } : {};
  if (v.type === 'auto') return { choice: { type: 'auto' }, ...parallel };
  if (v.type === 'any') return { choice: { type: 'required' }, ...parallel };
  if (v.type === 'none') return { choice: { type: 'none' } };
  if (v.type === 'tool' && typeof v.name === 'string') return { choice: { type: 'tool', name: v.name }, ...parallel };
  throw new TranslationError('tool_choice.type must be auto, any, tool or none', 'tool_choice');
}

const EFFORT_BUDGET: Record<string, number> = { low: 2048, medium: 8192, high: 24576 };

/** A Messages request body as the IR, and the fate of each field the IR does not carry. */
export function decodeMessagesRequest(body: Json): { ir: IrRequest; fates: IrFieldFate[] } {
  const fates = fatesOf(body, MAPPED, MESSAGES_FATES, 'not part of the Messages API this gateway translates');
  const cached = { seen: false };
  const system: string[] = [];
  let cacheSystem = false;
  if (typeof body.system === 'string') system.push(body.system);
  else if (Array.isArray(body.system)) {
    for (const b of body.system as unknown[]) {
      if (isObj(b) && b.cache_control !== undefined && b.cache_control !== null) cached.seen = cacheSystem = true;
      if (isObj(b) && typeof b.text === 'string') system.push(b.text);
    }
  }
  const messages: IrMessage[] = [];
  const list = Array.isArray(body.messages) ? body.messages : [];
  list.forEach((m: unknown, i) => {
    const where = `messages[${i}].content`;
    if (!isObj(m)) throw new TranslationError(`messages[${i}] must be an object`, 'messages');
    // Claude Code sends system messages in mid-conversation: they join the instructions.
    if (m.role === 'system') {
      const t = textOf(m.content);
      if (t) system.push(t);
      return;
    }
    if (m.role !== 'user' && m.role !== 'assistant') throw new TranslationError(`messages[${i}].role must be user or assistant`, 'messages');
    messages.push({ role: m.role, content: blocks(m.content, where, cached) });
  });
  const tools: IrTool[] = [];
  if (Array.isArray(body.tools)) {
    body.tools.forEach((t: unknown, i) => {
      if (!isObj(t)) throw new TranslationError(`tools[${i}] must be an object`, 'tools');
      const cache = t.cache_control !== undefined && t.cache_control !== null;
      if (cache) cached.seen = true;
      if (t.type !== undefined && t.type !== 'custom') {
        throw new TranslationError(`tools[${i}]: the server tool "${typeof t.type === 'string' ? t.type : '?'}" is not available from this backend`, 'tools');
      }
      tools.push({
        name: str(t.name) ?? '',
        ...(typeof t.description === 'string' ? { description: t.description } : {}),
        parameters: isObj(t.input_schema) ? t.input_schema : { type: 'object', properties: {} },
        ...(cache ? { cache: true as const } : {}),
      });
    });
  }
  // Carried to the backends that take breakpoints (Anthropic on Vertex, Bedrock's cache points); named as dropped by the others.
  if (cached.seen)
    fates.push({
      field: 'cache_control',
      fate: 'dropped',
      why: 'a caching hint: carried to Anthropic wires (Vertex) and as Bedrock cache points; other backends cache by themselves or not at all',
    });
  const tc = toolChoiceOf(body.tool_choice);
  const thinking = isObj(body.thinking) ? body.thinking : undefined;
  const effort = isObj(body.output_config) ? str(body.output_config.effort) : undefined;
  let reasoning: IrRequest['reasoning'];
  if (thinking?.type === 'enabled') reasoning = { ...(typeof thinking.budget_tokens === 'number' ? { budgetTokens: thinking.budget_tokens } : {}) };
  else if (thinking?.type === 'adaptive') reasoning = { effort: effort === 'low' || effort === 'high' ? effort : 'medium' };
  if (reasoning && reasoning.budgetTokens !== undefined && !reasoning.effort) {
    const b = reasoning.budgetTokens;
    reasoning.effort = b <= EFFORT_BUDGET.low! ? 'low' : b <= EFFORT_BUDGET.medium! ? 'medium' : 'high';
  }
  const user = isObj(body.metadata) ? str(body.metadata.user_id) : undefined;
  const responseFormat = formatOf(isObj(body.output_config) ? body.output_config.format : body.output_format);
  const ir: IrRequest = {
    system,
    ...(cacheSystem ? { cacheSystem: true as const } : {}),
    messages,
    tools,
    stream: body.stream === true,
    ...(tc.choice ? { toolChoice: tc.choice } : {}),
    ...(tc.parallel !== undefined ? { parallelToolCalls: tc.parallel } : {}),
    ...(typeof body.max_tokens === 'number' ? { maxOutputTokens: body.max_tokens } : {}),
    ...(typeof body.temperature === 'number' ? { temperature: body.temperature } : {}),
    ...(typeof body.top_p === 'number' ? { topP: body.top_p } : {}),
    ...(Array.isArray(body.stop_sequences) ? { stop: body.stop_sequences.filter((s): s is string => typeof s === 'string') } : {}),
    ...(reasoning ? { reasoning } : {}),
    ...(responseFormat ? { responseFormat } : {}),
    ...(user ? { user } : {}),
  };
  return { ir, fates };
}

/** Anthropic's structured output (`output_config.format`, formerly `output_format`) as the IR's answer format. */
function formatOf(f: unknown): IrRequest['responseFormat'] {
  if (!isObj(f) || f.type !== 'json_schema') return undefined;
  if (!isObj(f.schema)) throw new TranslationError('output_config.format.schema must be a JSON Schema object', 'output_config');
  return { type: 'json_schema', name: 'output', schema: f.schema, strict: true };
}

const STOP: Record<IrFinish['reason'], string> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  content_filter: 'refusal',
  error: 'end_turn',
  other: 'end_turn',
};

const stopReason = (f: IrFinish) => (f.reason === 'stop' && f.raw === 'stop_sequence' ? 'stop_sequence' : STOP[f.reason]);

function blockOf(p: IrPart): Json | undefined {
  switch (p.type) {
    case 'text':
      return { type: 'text', text: p.text };
    case 'reasoning':
      return { type: 'thinking', thinking: p.text, signature: p.signature ?? '' };
    case 'redacted_reasoning':
      return { type: 'redacted_thinking', data: p.data };
    case 'tool_call':
      return { type: 'tool_use', id: p.id, name: p.name, input: parseArgs(p.arguments) };
    default:
      return undefined;
  }
}

/** Tool arguments as the object Anthropic clients expect; text that is not JSON is kept under "_raw". */
export function parseArgs(args: string): unknown {
  if (args.trim() === '') return {};
  try {
    const v = JSON.parse(args) as unknown;
    return isObj(v) ? v : { _raw: args };
  } catch {
    return { _raw: args };
  }
}

/** A whole answer in the Messages shape. `model` is the gateway's model code. */
export function encodeMessagesResponse(r: IrResponse, model: string): Json {
  return {
    id: r.id.startsWith('msg_') ? r.id : `msg_${r.id}`,
    type: 'message',
    role: 'assistant',
    model,
    content: r.content.flatMap((p): Json[] => {
      const b = blockOf(p);
      return b ? [b] : [];
    }),
    stop_reason: stopReason(r.finish),
    stop_sequence: null,
    usage: messagesUsageOf(r.usage),
  };
}

/**
 * IR stream parts to Messages events. Anthropic's blocks are sequential: a part for another block
 * closes the open one. The final message_delta carries the whole usage (input included: the
 * upstream reports it only at the end), then message_stop.
 */
export class MessagesStreamEncoder {
  private readonly sequencer = new ToolCallSequencer();
  private started = false;
  private open: { ir: number; kind: 'text' | 'thinking' | 'tool_use' } | undefined;
  private next = 0;

  constructor(private readonly model: string) {}

  private start(id: string): string {
    this.started = true;
    return encodeJsonEvent(
      {
        type: 'message_start',
        message: {
          id: id.startsWith('msg_') ? id : `msg_${id}`,
          type: 'message',
          role: 'assistant',
          model: this.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 0, output_tokens: 0 },
        },
      },
      'message_start',
    );
  }

  private close(): string {
    if (!this.open) return '';
    const out = encodeJsonEvent({ type: 'content_block_stop', index: this.next - 1 }, 'content_block_stop');
    this.open = undefined;
    return out;
  }

  private openBlock(ir: number, kind: 'text' | 'thinking' | 'tool_use', block: Json): string {
    if (this.open?.ir === ir && this.open.kind === kind) return '';
    const out = this.close();
    this.open = { ir, kind };
    return out + encodeJsonEvent({ type: 'content_block_start', index: this.next++, content_block: block }, 'content_block_start');
  }

  private delta(delta: Json): string {
    return encodeJsonEvent({ type: 'content_block_delta', index: this.next - 1, delta }, 'content_block_delta');
  }

  /** The bytes for one part (may be empty), its tool calls one after another. */
  encode(p: IrStreamPart): string {
    const parts = this.sequencer.push(p);
    return parts.length === 1 ? this.encodePart(parts[0]!) : parts.map((q) => this.encodePart(q)).join('');
  }

  private encodePart(p: IrStreamPart): string {
    let out = '';
    if (!this.started && p.type !== 'error') out += this.start(p.type === 'start' ? p.id : `gw${Date.now().toString(36)}`);
    switch (p.type) {
      case 'text':
        return out + this.openBlock(p.index, 'text', { type: 'text', text: '' }) + this.delta({ type: 'text_delta', text: p.delta });
      case 'reasoning':
        return (
          out +
          this.openBlock(p.index, 'thinking', { type: 'thinking', thinking: '', signature: '' }) +
          this.delta({ type: 'thinking_delta', thinking: p.delta })
        );
      case 'reasoning_signature':
        return (
          out +
          this.openBlock(p.index, 'thinking', { type: 'thinking', thinking: '', signature: '' }) +
          this.delta({ type: 'signature_delta', signature: p.signature })
        );
      case 'tool_call_start':
        return out + this.openBlock(p.index, 'tool_use', { type: 'tool_use', id: p.id, name: p.name, input: {} });
      case 'tool_call_delta':
        return out + (this.open?.ir === p.index ? this.delta({ type: 'input_json_delta', partial_json: p.arguments }) : '');
      case 'block_end':
        return out + (this.open?.ir === p.index ? this.close() : '');
      case 'finish':
        return out + this.finish(p.finish, p.usage);
      case 'error':
        return `${out}${encodeJsonEvent({ type: 'error', error: { type: errorTypeFor(errorStatus(p.errorType), true), message: p.message } }, 'error')}`;
      default:
        return out;
    }
  }

  private finish(f: IrFinish, usage: Usage): string {
    return (
      this.close() +
      encodeJsonEvent({ type: 'message_delta', delta: { stop_reason: stopReason(f), stop_sequence: null }, usage: messagesUsageOf(usage) }, 'message_delta') +
      encodeJsonEvent({ type: 'message_stop' }, 'message_stop')
    );
  }
}
