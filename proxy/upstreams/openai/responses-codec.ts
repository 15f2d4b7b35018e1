import { emptyUsage, TranslationError, type IrFinish, type IrPart, type IrRequest, type IrResponse, type IrStreamPart } from '../../ir/chat.js';
import { eventObject, isObj, str, type Json } from '../../ir/json.js';
import type { Usage } from '../../ir/usage.js';
import { usageFromResponses } from '../../ir/wire-usage.js';

/**
 * An upstream that speaks only OpenAI Responses (a Responses-only model such as a codex one, or
 * a compatible server whose only chat path is /responses), reached through the IR: the request
 * encoded as input items, the answer (JSON or SSE) decoded from output items.
 */

/** The smallest max_output_tokens OpenAI's Responses takes ("integer below minimum value"). */
export const MIN_OUTPUT_CAP = 16;

function userItem(parts: IrPart[]): Json | undefined {
  const content: Json[] = [];
  for (const p of parts) {
    if (p.type === 'text') content.push({ type: 'input_text', text: p.text });
    else if (p.type === 'image') content.push({ type: 'input_image', image_url: 'url' in p ? p.url : `data:${p.mediaType};base64,${p.data}`, detail: 'auto' });
    else if (p.type === 'document')
      content.push({
        type: 'input_file',
        ...('url' in p ? { file_url: p.url } : { file_data: `data:${p.mediaType};base64,${p.data}` }),
        ...(p.filename ? { filename: p.filename } : {}),
      });
  }
  return content.length ? { role: 'user', content } : undefined;
}

/** What Responses cannot carry of a request: stop sequences (it has none; dropping them would change where the answer ends). */
export function responsesRefusal(ir: IrRequest): TranslationError | undefined {
  return ir.stop?.length ? new TranslationError('stop sequences are not available from this backend (it speaks only the Responses API)', 'stop') : undefined;
}

/** The request body for `model`; `cap` is the output cap the hold was sized for. */
export function encodeResponsesRequest(ir: IrRequest, model: string, cap: number): Json {
  const refused = responsesRefusal(ir);
  if (refused) throw refused;
  const input: Json[] = [];
  for (const m of ir.messages) {
    if (m.role === 'user') {
      const rest: IrPart[] = [];
      for (const p of m.content) {
        if (p.type === 'tool_result') {
          const text = p.isError ? `Error: ${p.content}` : p.content;
          // An output may be a list of inputs: the tool's images go with its text.
          const output = p.images?.length ? (userItem([...(text ? [{ type: 'text' as const, text }] : []), ...p.images])!.content as Json[]) : text;
          input.push({ type: 'function_call_output', call_id: p.callId, output });
        } else rest.push(p);
      }
      const item = userItem(rest);
      if (item) input.push(item);
      continue;
    }
    let text = '';
    const flush = () => {
      if (text) input.push({ role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] });
      text = '';
    };
    for (const p of m.content) {
      if (p.type === 'text') text += p.text;
      else if (p.type === 'tool_call') {
        flush();
        input.push({ type: 'function_call', call_id: p.id, name: p.name, arguments: p.arguments });
      }
      // Reasoning from another provider cannot be replayed here (OpenAI needs its own encrypted items).
    }
    flush();
  }
  const tc = ir.toolChoice;
  const rf = ir.responseFormat;
  return {
    model,
    ...(ir.system.length ? { instructions: ir.system.join('\n\n') } : {}),
    input,
    ...(ir.tools.length
      ? {
          tools: ir.tools.map((t) => ({
            type: 'function',
            name: t.name,
            ...(t.description !== undefined ? { description: t.description } : {}),
            parameters: t.parameters,
            strict: false,
          })),
        }
      : {}),
    ...(tc && ir.tools.length ? { tool_choice: tc.type === 'tool' ? { type: 'function', name: tc.name } : tc.type } : {}),
    ...(ir.parallelToolCalls !== undefined && ir.tools.length ? { parallel_tool_calls: ir.parallelToolCalls } : {}),
    // OpenAI's Responses takes no cap under 16 (Claude Code probes with max_tokens: 1).
    max_output_tokens: Math.max(cap, MIN_OUTPUT_CAP),
    ...(ir.temperature !== undefined ? { temperature: ir.temperature } : {}),
    ...(ir.topP !== undefined ? { top_p: ir.topP } : {}),
    ...(ir.reasoning ? { reasoning: { effort: ir.reasoning.effort ?? effortOf(ir.reasoning.budgetTokens), summary: 'auto' } } : {}),
    ...(rf?.type === 'json_object' ? { text: { format: { type: 'json_object' } } } : {}),
    ...(rf?.type === 'json_schema'
      ? { text: { format: { type: 'json_schema', name: rf.name, schema: rf.schema, ...(rf.strict !== undefined ? { strict: rf.strict } : {}) } } }
      : {}),
    ...(ir.user ? { user: ir.user } : {}),
    // The gateway keeps no conversation at OpenAI for a translated client.
    store: false,
    stream: ir.stream,
  };
}

/** A thinking budget as the nearest effort (the inverse of the Messages codec's table). */
function effortOf(budget: number | undefined): string {
  if (budget === undefined) return 'medium';
  return budget < 4096 ? 'low' : budget < 16384 ? 'medium' : 'high';
}

/** Why a response ended, from its status, its incomplete reason and whether it called a tool. */
function finishOf(r: Json, called: boolean): IrFinish {
  const status = str(r.status) ?? '';
  const why = isObj(r.incomplete_details) ? str(r.incomplete_details.reason) : undefined;
  if (status === 'incomplete')
    return { reason: why === 'content_filter' ? 'content_filter' : why === 'max_output_tokens' ? 'length' : 'other', raw: why ?? status };
  if (status === 'completed') return { reason: called ? 'tool_calls' : 'stop', raw: status };
  return { reason: status === 'failed' ? 'error' : 'other', raw: status };
}

const summaryText = (item: Json): string =>
  (Array.isArray(item.summary) ? (item.summary as unknown[]) : [])
    .concat(Array.isArray(item.content) ? (item.content as unknown[]) : [])
    .map((s) => (isObj(s) ? (str(s.text) ?? '') : ''))
    .join('');

/** A whole Responses answer as the IR. */
export function decodeResponsesResponse(body: unknown): IrResponse {
  const b = isObj(body) ? body : {};
  const content: IrPart[] = [];
  for (const item of Array.isArray(b.output) ? (b.output as unknown[]) : []) {
    if (!isObj(item)) continue;
    if (item.type === 'reasoning') {
      const text = summaryText(item);
      if (text) content.push({ type: 'reasoning', text });
    } else if (item.type === 'message') {
      for (const c of Array.isArray(item.content) ? (item.content as unknown[]) : [])
        if (isObj(c) && (c.type === 'output_text' || c.type === 'refusal')) content.push({ type: 'text', text: str(c.text) ?? str(c.refusal) ?? '' });
    } else if (item.type === 'function_call') {
      content.push({ type: 'tool_call', id: str(item.call_id) ?? str(item.id) ?? '', name: str(item.name) ?? '', arguments: str(item.arguments) ?? '{}' });
    }
  }
  return {
    id: str(b.id) ?? `gw${Date.now().toString(36)}`,
    content,
    finish: finishOf(
      b,
      content.some((p) => p.type === 'tool_call'),
    ),
    usage: usageFromResponses(b.usage) ?? emptyUsage(),
  };
}

/**
 * A Responses SSE stream as IR parts. Each output item is one IR block, numbered in the order
 * the items are added; `response.completed` (or `incomplete`) carries the usage and the finish,
 * `response.failed` and `error` end the stream with an error.
 */
export class ResponsesStreamDecoder {
  private usage: Usage | null = null;
  private readonly blocks = new Map<number, { index: number; kind: string }>();
  private next = 0;
  private called = false;
  done = false;
  outputBytes = 0;

  get reported(): Usage | null {
    return this.usage;
  }

  private block(j: Json): { index: number; kind: string } | undefined {
    return this.blocks.get(typeof j.output_index === 'number' ? j.output_index : -1);
  }

  event(event: string, data: string): IrStreamPart[] {
    if (this.done) return [];
    const j = eventObject(data);
    if (!j) return [];
    switch (str(j.type) ?? event) {
      case 'response.created': {
        const r = isObj(j.response) ? j.response : {};
        return [{ type: 'start', id: str(r.id) ?? `gw${Date.now().toString(36)}` }];
      }
      case 'response.output_item.added': {
        const item = isObj(j.item) ? j.item : {};
        const kind = str(item.type) ?? '';
        const b = { index: this.next++, kind };
        this.blocks.set(typeof j.output_index === 'number' ? j.output_index : this.blocks.size, b);
        if (kind === 'function_call') {
          this.called = true;
          return [{ type: 'tool_call_start', index: b.index, id: str(item.call_id) ?? str(item.id) ?? `call_${b.index}`, name: str(item.name) ?? '' }];
        }
        return [];
      }
      case 'response.output_text.delta':
      case 'response.refusal.delta':
      case 'response.reasoning_summary_text.delta':
      case 'response.reasoning_text.delta':
      case 'response.function_call_arguments.delta': {
        const b = this.block(j);
        const delta = str(j.delta);
        if (!b || !delta) return [];
        this.outputBytes += delta.length;
        if (b.kind === 'function_call') return [{ type: 'tool_call_delta', index: b.index, arguments: delta }];
        return [{ type: b.kind === 'reasoning' ? 'reasoning' : 'text', index: b.index, delta }];
      }
      case 'response.output_item.done': {
        const b = this.block(j);
        return b ? [{ type: 'block_end', index: b.index }] : [];
      }
      case 'response.completed':
      case 'response.incomplete': {
        const r = isObj(j.response) ? j.response : {};
        this.usage = usageFromResponses(r.usage) ?? this.usage;
        this.done = true;
        return [{ type: 'finish', finish: finishOf(r, this.called), usage: this.usage ?? emptyUsage() }];
      }
      case 'response.failed': {
        this.done = true;
        const r = isObj(j.response) ? j.response : {};
        const e = isObj(r.error) ? r.error : {};
        return [{ type: 'error', message: str(e.message) ?? 'the response failed', ...(str(e.code) ? { errorType: str(e.code)! } : {}) }];
      }
      case 'error': {
        this.done = true;
        const e = isObj(j.error) ? j.error : j;
        return [
          { type: 'error', message: str(e.message) ?? 'upstream error', ...((str(e.type) ?? str(e.code)) ? { errorType: (str(e.type) ?? str(e.code))! } : {}) },
        ];
      }
      default:
        return [];
    }
  }

  /** The stream ended: a completed response has already finished it; anything else was cut. */
  finish(): IrStreamPart[] {
    return [];
  }
}
