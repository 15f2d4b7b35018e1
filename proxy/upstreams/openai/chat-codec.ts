import { emptyUsage, finishFrom, TranslationError, type IrFinish, type IrPart, type IrRequest, type IrResponse, type IrStreamPart } from '../../ir/chat.js';
import { eventObject, isObj, str, type Json } from '../../ir/json.js';
import type { Usage } from '../../ir/usage.js';
import { usageFromChat } from '../../ir/wire-usage.js';

/**
 * An upstream that speaks OpenAI Chat Completions (OpenAI itself and compatible servers), reached
 * through the IR: the request encoded for it, its answer (JSON or SSE) decoded.
 */

function userContent(parts: IrPart[]): string | Json[] {
  const out: Json[] = [];
  for (const p of parts) {
    if (p.type === 'text') out.push({ type: 'text', text: p.text });
    else if (p.type === 'image') out.push({ type: 'image_url', image_url: { url: 'url' in p ? p.url : `data:${p.mediaType};base64,${p.data}` } });
    else if (p.type === 'document' && !('url' in p)) {
      out.push({ type: 'file', file: { filename: p.filename ?? 'document', file_data: `data:${p.mediaType};base64,${p.data}` } });
    }
  }
  return out.length === 1 && out[0]!.type === 'text' ? (out[0]!.text as string) : out;
}

/** What Chat Completions cannot carry of a request: a document given by URL (it takes files inline only). */
export function chatRefusal(ir: IrRequest): TranslationError | undefined {
  const byUrl = ir.messages.some((m) => m.content.some((p) => p.type === 'document' && 'url' in p));
  return byUrl ? new TranslationError('a document given by URL cannot be sent to a Chat Completions backend: send it inline (base64)', 'messages') : undefined;
}

/**
 * The request body for `model`. `openaiItself`: OpenAI's reasoning models take only
 * max_completion_tokens; compatible servers mostly know only max_tokens.
 */
export function encodeChatRequest(ir: IrRequest, model: string, o: { openaiItself: boolean }): Json {
  const refused = chatRefusal(ir);
  if (refused) throw refused;
  const messages: Json[] = ir.system.map((text) => ({ role: 'system', content: text }));
  for (const m of ir.messages) {
    if (m.role === 'user') {
      // Tool results become tool messages, in order; what else the turn holds stays a user message.
      // A tool message takes text only: the images tools returned follow, in that user message.
      const rest: IrPart[] = [];
      const shown: IrPart[] = [];
      for (const p of m.content) {
        if (p.type === 'tool_result') {
          messages.push({ role: 'tool', tool_call_id: p.callId, content: p.isError ? `Error: ${p.content}` : p.content });
          if (p.images?.length) shown.push({ type: 'text', text: `The images the tool call ${p.callId} returned:` }, ...p.images);
        } else rest.push(p);
      }
      if (shown.length || rest.length) messages.push({ role: 'user', content: userContent([...shown, ...rest]) });
      continue;
    }
    const text = m.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
    const calls = m.content.flatMap((p) =>
      p.type === 'tool_call' ? [{ id: p.id, type: 'function', function: { name: p.name, arguments: p.arguments } }] : [],
    );
    messages.push({ role: 'assistant', content: text === '' && calls.length ? null : text, ...(calls.length ? { tool_calls: calls } : {}) });
  }
  const tc = ir.toolChoice;
  return {
    model,
    messages,
    ...(ir.tools.length
      ? {
          tools: ir.tools.map((t) => ({
            type: 'function',
            function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.parameters },
          })),
        }
      : {}),
    ...(tc && ir.tools.length ? { tool_choice: tc.type === 'tool' ? { type: 'function', function: { name: tc.name } } : tc.type } : {}),
    ...(ir.parallelToolCalls !== undefined && ir.tools.length ? { parallel_tool_calls: ir.parallelToolCalls } : {}),
    ...(ir.maxOutputTokens !== undefined ? { [o.openaiItself ? 'max_completion_tokens' : 'max_tokens']: ir.maxOutputTokens } : {}),
    ...(ir.temperature !== undefined ? { temperature: ir.temperature } : {}),
    ...(ir.topP !== undefined ? { top_p: ir.topP } : {}),
    ...(ir.stop?.length ? { stop: ir.stop } : {}),
    ...(ir.reasoning?.effort ? { reasoning_effort: ir.reasoning.effort } : {}),
    ...(ir.responseFormat?.type === 'json_object' ? { response_format: { type: 'json_object' } } : {}),
    ...(ir.responseFormat?.type === 'json_schema'
      ? {
          response_format: {
            type: 'json_schema',
            json_schema: {
              name: ir.responseFormat.name,
              schema: ir.responseFormat.schema,
              ...(ir.responseFormat.strict !== undefined ? { strict: ir.responseFormat.strict } : {}),
            },
          },
        }
      : {}),
    ...(ir.user ? { user: ir.user } : {}),
    stream: ir.stream,
    ...(ir.stream ? { stream_options: { include_usage: true } } : {}),
  };
}

const FINISH: Record<string, IrFinish['reason']> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
  content_filter: 'content_filter',
};
const finishOf = (raw: unknown): IrFinish => finishFrom(FINISH, raw);

/** A whole Chat Completions answer (the first choice) as the IR. */
export function decodeChatResponse(body: unknown): IrResponse {
  const b = isObj(body) ? body : {};
  const choice = Array.isArray(b.choices) && isObj(b.choices[0]) ? b.choices[0] : {};
  const msg = isObj(choice.message) ? choice.message : {};
  const content: IrPart[] = [];
  const reasoning = str(msg.reasoning_content) ?? str(msg.reasoning);
  if (reasoning) content.push({ type: 'reasoning', text: reasoning });
  if (typeof msg.content === 'string' && msg.content !== '') content.push({ type: 'text', text: msg.content });
  if (Array.isArray(msg.tool_calls)) {
    for (const c of msg.tool_calls as unknown[]) {
      if (isObj(c) && isObj(c.function))
        content.push({ type: 'tool_call', id: str(c.id) ?? '', name: str(c.function.name) ?? '', arguments: str(c.function.arguments) ?? '{}' });
    }
  }
  return { id: str(b.id) ?? `gw${Date.now().toString(36)}`, content, finish: finishOf(choice.finish_reason), usage: usageFromChat(b.usage) ?? emptyUsage() };
}

/**
 * A Chat Completions SSE stream as IR parts, event by event. Blocks get IR indexes in the order
 * they appear: reasoning, text, then each tool call by its own index. The usage chunk may come
 * after the finish_reason (include_usage), so finish is emitted at [DONE] (or end of stream).
 */
export class ChatStreamDecoder {
  private started = false;
  private next = 0;
  private text: number | undefined;
  private reasoning: number | undefined;
  private readonly tools = new Map<number, number>();
  private finishRaw: unknown;
  private usage: Usage | null = null;
  done = false;
  /** Bytes of text, reasoning and tool arguments seen (an estimate's basis if the stream is cut). */
  outputBytes = 0;

  /** Usage reported so far. */
  get reported(): Usage | null {
    return this.usage;
  }

  event(_event: string, data: string): IrStreamPart[] {
    if (this.done) return [];
    if (data === '[DONE]') return this.finish();
    const j = eventObject(data);
    if (!j) return [];
    const out: IrStreamPart[] = [];
    if (isObj(j.error)) {
      this.done = true;
      return [{ type: 'error', message: str(j.error.message) ?? 'upstream error', ...(str(j.error.type) ? { errorType: str(j.error.type)! } : {}) }];
    }
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', id: str(j.id) ?? `gw${Date.now().toString(36)}` });
    }
    if (isObj(j.usage)) this.usage = usageFromChat(j.usage);
    const choice = Array.isArray(j.choices) && isObj(j.choices[0]) ? j.choices[0] : undefined;
    if (!choice) return out;
    const d = isObj(choice.delta) ? choice.delta : {};
    const r = str(d.reasoning_content) ?? str(d.reasoning);
    if (r) {
      this.reasoning ??= this.next++;
      this.outputBytes += r.length;
      out.push({ type: 'reasoning', index: this.reasoning, delta: r });
    }
    if (typeof d.content === 'string' && d.content !== '') {
      if (this.text === undefined) {
        if (this.reasoning !== undefined) out.push({ type: 'block_end', index: this.reasoning });
        this.text = this.next++;
      }
      this.outputBytes += d.content.length;
      out.push({ type: 'text', index: this.text, delta: d.content });
    }
    if (Array.isArray(d.tool_calls)) {
      for (const c of d.tool_calls as unknown[]) {
        if (!isObj(c)) continue;
        const k = typeof c.index === 'number' ? c.index : 0;
        const f = isObj(c.function) ? c.function : {};
        let ir = this.tools.get(k);
        if (ir === undefined) {
          // The first call ends the text (or reasoning) before it. Calls end only with the stream:
          // each delta names its call's index, so a server may interleave parallel calls.
          const prev = this.tools.size ? undefined : (this.text ?? this.reasoning);
          if (prev !== undefined) out.push({ type: 'block_end', index: prev });
          ir = this.next++;
          this.tools.set(k, ir);
          out.push({ type: 'tool_call_start', index: ir, id: str(c.id) ?? `call_${ir}`, name: str(f.name) ?? '' });
        }
        const args = str(f.arguments);
        if (args) {
          this.outputBytes += args.length;
          out.push({ type: 'tool_call_delta', index: ir, arguments: args });
        }
      }
    }
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) this.finishRaw = choice.finish_reason;
    return out;
  }

  /** The stream's end: block ends and the finish part. Undefined finish (cut stream) is the caller's to handle. */
  finish(): IrStreamPart[] {
    if (this.done) return [];
    this.done = true;
    const out: IrStreamPart[] = [];
    const last = this.text ?? this.reasoning;
    if (this.tools.size) for (const ir of this.tools.values()) out.push({ type: 'block_end', index: ir });
    else if (last !== undefined) out.push({ type: 'block_end', index: last });
    out.push({ type: 'finish', finish: finishOf(this.finishRaw), usage: this.usage ?? emptyUsage() });
    return out;
  }

  /** Whether the upstream said why it stopped (the stream was not cut). */
  get finished(): boolean {
    return this.finishRaw !== undefined;
  }
}
