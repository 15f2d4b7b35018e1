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
import { isObj, str, type Json } from '../../ir/json.js';
import type { Usage } from '../../ir/usage.js';
import { encodeJsonEvent } from '../../sse/index.js';
import { ToolCallSequencer } from '../tool-sequence.js';

/**
 * OpenAI Responses as a client protocol in front of a backend that speaks another one (Codex on a
 * Claude model): the request decoded to the IR, the answer encoded from it. Every SSE event
 * carries `type` and `sequence_number`; a failure ends with `response.failed` (Codex ignores
 * `error` events). Responses `custom` tools (Codex's apply_patch) travel as functions of one
 * string argument and come back as custom tool calls.
 */

/** Fields of a Responses request that the IR does not carry, and why. */
export const RESPONSES_FATES: Record<string, FieldRule> = {
  conversation: { fate: 'refused', why: 'server-side conversation state is not available from this backend' },
  background: { fate: 'refused', why: 'background responses are not available from this backend' },
  prompt: { fate: 'refused', why: 'stored prompt templates are not available from this backend' },
  include: { fate: 'dropped', why: 'OpenAI-side extras (encrypted reasoning cannot come from another provider)' },
  prompt_cache_key: { fate: 'dropped', why: 'an OpenAI caching hint' },
  service_tier: { fate: 'dropped', why: 'an OpenAI scheduling hint' },
  metadata: { fate: 'dropped', why: 'OpenAI-side metadata' },
  client_metadata: { fate: 'dropped', why: 'client metadata for OpenAI' },
  truncation: { fate: 'dropped', why: 'OpenAI-side context truncation' },
  safety_identifier: { fate: 'dropped', why: 'an OpenAI abuse-monitoring hint' },
  top_logprobs: { fate: 'refused', why: 'token log-probabilities are not available from this backend' },
  max_tool_calls: { fate: 'dropped', why: 'an OpenAI limit on hosted tool calls' },
};

/** Members the decoder maps (`text` for its format). */
export const RESPONSES_MAPPED = [
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_output_tokens',
  'temperature',
  'top_p',
  'reasoning',
  'text',
  'user',
  'stream',
  'previous_response_id',
  'store',
] as const;
const MAPPED = new Set<string>(RESPONSES_MAPPED);

/** Tools the Responses API hosts itself: dropped (named) unless the request forces one. */
const HOSTED = new Set([
  'web_search',
  'web_search_preview',
  'file_search',
  'code_interpreter',
  'computer_use_preview',
  'image_generation',
  'local_shell',
  'mcp',
]);

function contentParts(content: unknown, where: string): IrPart[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [];
  return content.flatMap((p: unknown, i): IrPart[] => {
    if (!isObj(p)) return [];
    if (p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') return [{ type: 'text', text: str(p.text) ?? '' }];
    if (p.type === 'refusal') return [{ type: 'text', text: str(p.refusal) ?? '' }];
    if (p.type === 'input_image') {
      const url = str(p.image_url);
      if (!url) throw new TranslationError(`${where}[${i}]: only input images given by image_url are available through translation`, 'input');
      const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
      return [m ? { type: 'image', mediaType: m[1]!, data: m[2]! } : { type: 'image', url }];
    }
    if (p.type === 'input_file') {
      const filename = str(p.filename) ? { filename: p.filename as string } : {};
      const m = /^data:([^;,]+);base64,(.*)$/s.exec(str(p.file_data) ?? '');
      if (m) return [{ type: 'document', mediaType: m[1]!, data: m[2]!, ...filename }];
      if (str(p.file_url)) return [{ type: 'document', url: p.file_url as string, ...filename }];
      throw new TranslationError(`${where}[${i}]: only input files given inline (file_data) or by file_url are available through translation`, 'input');
    }
    throw new TranslationError(`${where}[${i}]: content type "${typeof p.type === 'string' ? p.type : '?'}" is not available through translation`, 'input');
  });
}

export interface ResponsesDecoded {
  ir: IrRequest;
  fates: IrFieldFate[];
  /** Names of `custom` tools: their calls go back as custom_tool_call items. */
  custom: Set<string>;
  /** The earlier response this one continues (its conversation comes before `input`). */
  previousResponseId?: string;
  /** Whether the response is kept so a later request can continue it (Responses' default). */
  store: boolean;
}

/** The id a client sees for an answer whose upstream id is `id`. */
export const responseIdOf = (id: string): string => (id.startsWith('resp_') ? id : `resp_${id}`);

/** A Responses request body as the IR, and the fate of each field the IR does not carry. */
export function decodeResponsesRequest(body: Json): ResponsesDecoded {
  const fates = fatesOf(body, MAPPED, RESPONSES_FATES, 'not part of the Responses API this gateway translates');
  const system: string[] = [];
  if (typeof body.instructions === 'string' && body.instructions) system.push(body.instructions);
  const messages: IrMessage[] = [];
  const add = (role: IrMessage['role'], parts: IrPart[]) => {
    const last = messages.at(-1);
    // Calls of one turn, and the results that answer them, come as separate items: one IR turn each.
    const merge =
      last &&
      last.role === role &&
      (parts.every((p) => p.type === 'tool_call' || p.type === 'tool_result') || last.content.every((p) => p.type === 'tool_call'));
    if (merge) last.content.push(...parts);
    else messages.push({ role, content: parts });
  };
  let droppedReasoning = false;
  const items = typeof body.input === 'string' ? [{ type: 'message', role: 'user', content: body.input }] : Array.isArray(body.input) ? body.input : [];
  items.forEach((it: unknown, i) => {
    if (!isObj(it)) throw new TranslationError(`input[${i}] must be an object`, 'input');
    const type = it.type ?? 'message';
    switch (type) {
      case 'message': {
        const parts = contentParts(it.content, `input[${i}].content`);
        if (it.role === 'system' || it.role === 'developer') {
          const text = parts.map((p) => (p.type === 'text' ? p.text : '')).join('\n');
          if (text) system.push(text);
        } else if (it.role === 'user' || it.role === 'assistant') {
          if (parts.length) add(it.role, parts);
        } else throw new TranslationError(`input[${i}].role must be user, assistant, system or developer`, 'input');
        return;
      }
      case 'function_call':
        add('assistant', [{ type: 'tool_call', id: str(it.call_id) ?? '', name: str(it.name) ?? '', arguments: str(it.arguments) ?? '{}' }]);
        return;
      case 'custom_tool_call':
        add('assistant', [
          { type: 'tool_call', id: str(it.call_id) ?? '', name: str(it.name) ?? '', arguments: JSON.stringify({ input: str(it.input) ?? '' }) },
        ]);
        return;
      case 'function_call_output':
      case 'custom_tool_call_output': {
        const out = it.output;
        const parts = typeof out === 'string' ? [] : contentParts(out, `input[${i}].output`);
        const content = typeof out === 'string' ? out : parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
        const images = parts.filter((p): p is IrImage => p.type === 'image');
        add('user', [{ type: 'tool_result', callId: str(it.call_id) ?? '', content, ...(images.length ? { images } : {}) }]);
        return;
      }
      case 'reasoning':
        // OpenAI's encrypted reasoning is only valid at OpenAI; another provider cannot take it.
        droppedReasoning = true;
        return;
      default:
        throw new TranslationError(`input[${i}]: item type "${typeof type === 'string' ? type : '?'}" is not available through translation`, 'input');
    }
  });
  if (droppedReasoning) fates.push({ field: 'input[].reasoning', fate: 'dropped', why: "OpenAI's encrypted reasoning is valid only at OpenAI" });
  const tools: IrTool[] = [];
  const custom = new Set<string>();
  const hosted: string[] = [];
  const addTool = (t: unknown, where: string) => {
    if (!isObj(t)) throw new TranslationError(`${where} must be an object`, 'tools');
    if (t.type === 'function') {
      tools.push({
        name: str(t.name) ?? '',
        ...(typeof t.description === 'string' ? { description: t.description } : {}),
        parameters: isObj(t.parameters) ? t.parameters : { type: 'object', properties: {} },
      });
    } else if (t.type === 'custom') {
      const name = str(t.name) ?? '';
      custom.add(name);
      tools.push({
        name,
        description: `${str(t.description) ?? ''}\n(Give the tool's whole input as the string argument "input".)`.trim(),
        parameters: { type: 'object', properties: { input: { type: 'string' } }, required: ['input'] },
      });
    } else if (t.type === 'namespace' && Array.isArray(t.tools)) {
      // A namespace groups tools for the model's benefit; its tools keep their own names.
      (t.tools as unknown[]).forEach((inner, k) => addTool(inner, `${where}.tools[${k}]`));
    } else if (typeof t.type === 'string' && HOSTED.has(t.type)) {
      hosted.push(t.type);
    } else throw new TranslationError(`${where}: tool type "${typeof t.type === 'string' ? t.type : '?'}" is not available through translation`, 'tools');
  };
  if (Array.isArray(body.tools)) body.tools.forEach((t: unknown, i) => addTool(t, `tools[${i}]`));
  const tc = body.tool_choice;
  let toolChoice: IrToolChoice | undefined;
  if (tc === 'auto' || tc === 'none' || tc === 'required') toolChoice = { type: tc };
  else if (isObj(tc) && (tc.type === 'function' || tc.type === 'custom') && typeof tc.name === 'string') toolChoice = { type: 'tool', name: tc.name };
  else if (isObj(tc) && typeof tc.type === 'string' && HOSTED.has(tc.type)) {
    fates.push({ field: 'tool_choice', fate: 'refused', why: `the hosted tool ${tc.type} is not available from this backend` });
  }
  for (const h of hosted)
    fates.push({ field: `tools[${h}]`, fate: 'dropped', why: `the hosted tool ${h} is not available from this backend; the model answers without it` });
  const reasoning = isObj(body.reasoning) ? str(body.reasoning.effort) : undefined;
  const format = isObj(body.text) && isObj(body.text.format) ? body.text.format : undefined;
  const ir: IrRequest = {
    system,
    messages,
    tools,
    stream: body.stream === true,
    ...(toolChoice ? { toolChoice } : {}),
    ...(typeof body.parallel_tool_calls === 'boolean' ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    ...(typeof body.max_output_tokens === 'number' ? { maxOutputTokens: body.max_output_tokens } : {}),
    ...(typeof body.temperature === 'number' ? { temperature: body.temperature } : {}),
    ...(typeof body.top_p === 'number' ? { topP: body.top_p } : {}),
    ...(reasoning === 'minimal' || reasoning === 'low' || reasoning === 'medium' || reasoning === 'high' ? { reasoning: { effort: reasoning } } : {}),
    ...(format?.type === 'json_object' ? { responseFormat: { type: 'json_object' as const } } : {}),
    ...(format?.type === 'json_schema' && isObj(format.schema)
      ? {
          responseFormat: {
            type: 'json_schema' as const,
            name: str(format.name) ?? 'answer',
            schema: format.schema,
            ...(typeof format.strict === 'boolean' ? { strict: format.strict } : {}),
          },
        }
      : {}),
    ...(typeof body.user === 'string' ? { user: body.user } : {}),
  };
  const previous = body.previous_response_id;
  if (previous !== undefined && previous !== null && (typeof previous !== 'string' || previous === ''))
    throw new TranslationError('previous_response_id must be a response id', 'previous_response_id');
  return { ir, fates, custom, store: body.store !== false, ...(previous ? { previousResponseId: previous } : {}) };
}

function usageOf(u: Usage) {
  return {
    input_tokens: u.inputTokens,
    input_tokens_details: { cached_tokens: u.cachedInputTokens },
    output_tokens: u.outputTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens },
    total_tokens: u.inputTokens + u.outputTokens,
  };
}

const rid = (prefix: string) => `${prefix}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;

function callItem(p: { id: string; name: string; arguments: string }, custom: Set<string>, status: string): Json {
  if (custom.has(p.name)) {
    let input = p.arguments;
    try {
      const v = JSON.parse(p.arguments) as unknown;
      if (isObj(v) && typeof v.input === 'string') input = v.input;
    } catch {
      // Not the object the tool was described with: pass the text as it came.
    }
    return { type: 'custom_tool_call', id: `ctc_${p.id}`, call_id: p.id, name: p.name, input, status };
  }
  return { type: 'function_call', id: `fc_${p.id}`, call_id: p.id, name: p.name, arguments: p.arguments, status };
}

/** An answer cut by its cap or by a content filter is `incomplete` (incomplete_details says which), as OpenAI's. */
function statusOf(finish: IrFinish): 'completed' | 'incomplete' {
  return finish.reason === 'length' || finish.reason === 'content_filter' ? 'incomplete' : 'completed';
}

function envelope(id: string, model: string, status: string, output: Json[], finish: IrFinish | undefined, usage: Usage | undefined): Json {
  return {
    id,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    model,
    output,
    ...(usage ? { usage: usageOf(usage) } : { usage: null }),
    incomplete_details:
      finish?.reason === 'length' ? { reason: 'max_output_tokens' } : finish?.reason === 'content_filter' ? { reason: 'content_filter' } : null,
    error: null,
  };
}

/** A whole answer in the Responses shape. `model` is the gateway's model code. */
export function encodeResponsesResponse(r: IrResponse, model: string, custom: Set<string>): Json {
  const output: Json[] = [];
  const reasoning = r.content.filter((p) => p.type === 'reasoning').map((p) => (p.type === 'reasoning' ? p.text : ''));
  if (reasoning.length) output.push({ type: 'reasoning', id: rid('rs'), summary: reasoning.map((text) => ({ type: 'summary_text', text })) });
  const text = r.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
  if (text)
    output.push({ type: 'message', id: rid('msg'), role: 'assistant', status: statusOf(r.finish), content: [{ type: 'output_text', text, annotations: [] }] });
  for (const p of r.content) if (p.type === 'tool_call') output.push(callItem(p, custom, 'completed'));
  return envelope(responseIdOf(r.id), model, statusOf(r.finish), output, r.finish, r.usage);
}

interface OpenItem {
  ir: number;
  outputIndex: number;
  item: Json;
  kind: 'message' | 'reasoning' | 'call';
  text: string;
}

/** IR stream parts to Responses events, each with its type and sequence number. */
export class ResponsesStreamEncoder {
  private readonly sequencer = new ToolCallSequencer();
  private seq = 0;
  private started = false;
  private id = rid('resp');
  private readonly done: Json[] = [];
  private open: OpenItem | undefined;

  constructor(
    private readonly model: string,
    private readonly custom: Set<string>,
  ) {}

  private ev(type: string, fields: Json): string {
    return encodeJsonEvent({ type, sequence_number: this.seq++, ...fields }, type);
  }

  /** Ends the open item: `incomplete` when the answer stopped inside it (the cap, a filter, an error), as OpenAI marks it. */
  private close(status: 'completed' | 'incomplete' = 'completed'): string {
    const o = this.open;
    if (!o) return '';
    this.open = undefined;
    let out = '';
    if (o.kind === 'message') {
      const part = { type: 'output_text', text: o.text, annotations: [] };
      out += this.ev('response.output_text.done', { item_id: o.item.id, output_index: o.outputIndex, content_index: 0, text: o.text });
      out += this.ev('response.content_part.done', { item_id: o.item.id, output_index: o.outputIndex, content_index: 0, part });
      o.item = { ...o.item, status, content: [part] };
    } else if (o.kind === 'reasoning') {
      const part = { type: 'summary_text', text: o.text };
      out += this.ev('response.reasoning_summary_text.done', { item_id: o.item.id, output_index: o.outputIndex, summary_index: 0, text: o.text });
      out += this.ev('response.reasoning_summary_part.done', { item_id: o.item.id, output_index: o.outputIndex, summary_index: 0, part });
      o.item = { ...o.item, summary: [part] };
    } else {
      const item = callItem({ id: o.item.call_id as string, name: o.item.name as string, arguments: o.text }, this.custom, status);
      if (item.type === 'function_call') {
        out += this.ev('response.function_call_arguments.done', { item_id: o.item.id, output_index: o.outputIndex, arguments: o.text });
      } else {
        out += this.ev('response.custom_tool_call_input.done', { item_id: o.item.id, output_index: o.outputIndex, input: item.input });
      }
      o.item = item;
    }
    this.done.push(o.item);
    return out + this.ev('response.output_item.done', { output_index: o.outputIndex, item: o.item });
  }

  private openItem(ir: number, kind: OpenItem['kind'], item: Json): string {
    if (this.open?.ir === ir && this.open.kind === kind) return '';
    let out = this.close();
    const outputIndex = this.done.length;
    this.open = { ir, outputIndex, item, kind, text: '' };
    out += this.ev('response.output_item.added', { output_index: outputIndex, item });
    if (kind === 'message') {
      out += this.ev('response.content_part.added', {
        item_id: item.id,
        output_index: outputIndex,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      });
    } else if (kind === 'reasoning') {
      out += this.ev('response.reasoning_summary_part.added', {
        item_id: item.id,
        output_index: outputIndex,
        summary_index: 0,
        part: { type: 'summary_text', text: '' },
      });
    }
    return out;
  }

  /** The bytes for one part (may be empty), its tool calls one after another. */
  encode(p: IrStreamPart): string {
    const parts = this.sequencer.push(p);
    return parts.length === 1 ? this.encodePart(parts[0]!) : parts.map((q) => this.encodePart(q)).join('');
  }

  private encodePart(p: IrStreamPart): string {
    let out = '';
    if (!this.started) {
      this.started = true;
      if (p.type === 'start') this.id = responseIdOf(p.id);
      const r = envelope(this.id, this.model, 'in_progress', [], undefined, undefined);
      out += this.ev('response.created', { response: r }) + this.ev('response.in_progress', { response: r });
    }
    switch (p.type) {
      case 'text': {
        out += this.openItem(p.index, 'message', { type: 'message', id: rid('msg'), role: 'assistant', status: 'in_progress', content: [] });
        this.open!.text += p.delta;
        return (
          out + this.ev('response.output_text.delta', { item_id: this.open!.item.id, output_index: this.open!.outputIndex, content_index: 0, delta: p.delta })
        );
      }
      case 'reasoning': {
        out += this.openItem(p.index, 'reasoning', { type: 'reasoning', id: rid('rs'), summary: [] });
        this.open!.text += p.delta;
        return (
          out +
          this.ev('response.reasoning_summary_text.delta', {
            item_id: this.open!.item.id,
            output_index: this.open!.outputIndex,
            summary_index: 0,
            delta: p.delta,
          })
        );
      }
      case 'tool_call_start': {
        const custom = this.custom.has(p.name);
        const item = custom
          ? { type: 'custom_tool_call', id: `ctc_${p.id}`, call_id: p.id, name: p.name, input: '', status: 'in_progress' }
          : { type: 'function_call', id: `fc_${p.id}`, call_id: p.id, name: p.name, arguments: '', status: 'in_progress' };
        return out + this.openItem(p.index, 'call', item);
      }
      case 'tool_call_delta': {
        if (this.open?.ir !== p.index || this.open.kind !== 'call') return out;
        this.open.text += p.arguments;
        // A custom tool's input is one string inside the JSON arguments: it is sent whole at the end.
        if (this.open.item.type !== 'function_call') return out;
        return out + this.ev('response.function_call_arguments.delta', { item_id: this.open.item.id, output_index: this.open.outputIndex, delta: p.arguments });
      }
      case 'block_end':
        return out + (this.open?.ir === p.index ? this.close() : '');
      case 'finish': {
        const status = statusOf(p.finish);
        out += this.close(status);
        const type = status === 'completed' ? 'response.completed' : 'response.incomplete';
        return out + this.ev(type, { response: envelope(this.id, this.model, status, this.done, p.finish, p.usage) });
      }
      case 'error': {
        out += this.close('incomplete');
        const r = {
          ...envelope(this.id, this.model, 'failed', this.done, undefined, undefined),
          error: { code: errorStatus(p.errorType) === 429 ? 'rate_limit_exceeded' : 'server_error', message: p.message },
        };
        return out + this.ev('response.failed', { response: r });
      }
      default:
        return out;
    }
  }
}
