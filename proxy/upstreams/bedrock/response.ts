import { EventStreamCodec } from '@smithy/eventstream-codec';
import { emptyUsage, finishFrom, type IrFinish, type IrPart, type IrResponse, type IrStreamPart } from '../../ir/chat.js';
import { isObj, str, type Json } from '../../ir/json.js';
import { tokenCount, type Usage } from '../../ir/usage.js';

/**
 * Bedrock's Converse answer (JSON) and ConverseStream answer (application/vnd.amazon.eventstream:
 * binary messages, each with an :event-type and a JSON payload) as the IR. The binary framing,
 * its checksums and headers are read by the official codec (@smithy/eventstream-codec).
 */

/** Bedrock's inputTokens leaves out the cache reads and writes; Usage.inputTokens counts them all. */
export function usageFromConverse(u: unknown): Usage | null {
  if (!isObj(u)) return null;
  const read = tokenCount(u.cacheReadInputTokens);
  const write = tokenCount(u.cacheWriteInputTokens);
  return {
    inputTokens: tokenCount(u.inputTokens) + read + write,
    cachedInputTokens: read,
    cacheWriteTokens: write,
    outputTokens: tokenCount(u.outputTokens),
    reasoningTokens: 0,
  };
}

const FINISH: Record<string, IrFinish['reason']> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  guardrail_intervened: 'content_filter',
  content_filtered: 'content_filter',
};
const finishOf = (raw: unknown): IrFinish => finishFrom(FINISH, raw);

export function decodeConverseResponse(body: unknown): IrResponse {
  const b = isObj(body) ? body : {};
  const msg = isObj(b.output) && isObj(b.output.message) ? b.output.message : {};
  const content: IrPart[] = [];
  for (const c of Array.isArray(msg.content) ? (msg.content as unknown[]) : []) {
    if (!isObj(c)) continue;
    if (typeof c.text === 'string') content.push({ type: 'text', text: c.text });
    else if (isObj(c.toolUse))
      content.push({
        type: 'tool_call',
        id: str(c.toolUse.toolUseId) ?? '',
        name: str(c.toolUse.name) ?? '',
        arguments: JSON.stringify(c.toolUse.input ?? {}),
      });
    else if (isObj(c.reasoningContent)) {
      const r = c.reasoningContent;
      if (isObj(r.reasoningText)) {
        const sig = str(r.reasoningText.signature);
        content.push({ type: 'reasoning', text: str(r.reasoningText.text) ?? '', ...(sig ? { signature: sig } : {}) });
      } else if (typeof r.redactedContent === 'string') content.push({ type: 'redacted_reasoning', data: r.redactedContent });
    }
  }
  return { id: `bedrock-${Date.now().toString(36)}`, content, finish: finishOf(b.stopReason), usage: usageFromConverse(b.usage) ?? emptyUsage() };
}

const utf8 = new TextDecoder();
const codec = new EventStreamCodec(
  (bytes: Uint8Array) => utf8.decode(bytes),
  (text) => Buffer.from(text, 'utf8'),
);

/**
 * A ConverseStream answer, fed its bytes as they come. Bedrock's block indexes are the IR's;
 * the finish waits for the metadata event (usage) that follows messageStop.
 */
export class ConverseStreamDecoder {
  private buffer: Buffer = Buffer.alloc(0);
  private started = false;
  private readonly open = new Map<number, 'text' | 'reasoning' | 'tool'>();
  private stopRaw: unknown;
  private usage: Usage | null = null;
  done = false;
  outputBytes = 0;

  get reported(): Usage | null {
    return this.usage;
  }

  bytes(chunk: Buffer): IrStreamPart[] {
    const out: IrStreamPart[] = [];
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    // Each message starts with its total length (the prelude); the codec checks its CRCs and reads it.
    while (!this.done && this.buffer.length >= 4) {
      const total = this.buffer.readUInt32BE(0);
      if (this.buffer.length < total) break;
      const message = codec.decode(this.buffer.subarray(0, total));
      this.buffer = this.buffer.subarray(total);
      const h = (name: string) => {
        const v = message.headers[name];
        return v && v.type === 'string' ? v.value : undefined;
      };
      let payload: Json = {};
      try {
        const v = JSON.parse(utf8.decode(message.body)) as unknown;
        if (isObj(v)) payload = v;
      } catch {
        // an empty or unreadable payload is an event without data
      }
      if (h(':message-type') === 'exception' || h(':message-type') === 'error') {
        this.done = true;
        out.push({
          type: 'error',
          message: str(payload.message) ?? str(payload.Message) ?? 'upstream error',
          errorType: h(':exception-type') ?? h(':error-code') ?? 'error',
        });
        break;
      }
      out.push(...this.on(h(':event-type') ?? '', payload));
    }
    return out;
  }

  /** Bedrock never answers a stream in SSE: nothing to read there. */
  event(): IrStreamPart[] {
    return [];
  }

  private on(type: string, j: Json): IrStreamPart[] {
    if (this.done) return [];
    const out: IrStreamPart[] = [];
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', id: `bedrock-${Date.now().toString(36)}` });
    }
    const index = typeof j.contentBlockIndex === 'number' ? j.contentBlockIndex : 0;
    switch (type) {
      case 'contentBlockStart': {
        const start = isObj(j.start) ? j.start : {};
        if (isObj(start.toolUse)) {
          this.open.set(index, 'tool');
          out.push({ type: 'tool_call_start', index, id: str(start.toolUse.toolUseId) ?? `tooluse_${index}`, name: str(start.toolUse.name) ?? '' });
        }
        break;
      }
      case 'contentBlockDelta': {
        const d = isObj(j.delta) ? j.delta : {};
        if (typeof d.text === 'string') {
          this.open.set(index, 'text');
          this.outputBytes += d.text.length;
          if (d.text) out.push({ type: 'text', index, delta: d.text });
        } else if (isObj(d.toolUse) && typeof d.toolUse.input === 'string') {
          this.outputBytes += d.toolUse.input.length;
          if (d.toolUse.input) out.push({ type: 'tool_call_delta', index, arguments: d.toolUse.input });
        } else if (isObj(d.reasoningContent)) {
          this.open.set(index, 'reasoning');
          const r = d.reasoningContent;
          if (typeof r.text === 'string') {
            this.outputBytes += r.text.length;
            out.push({ type: 'reasoning', index, delta: r.text });
          } else if (typeof r.signature === 'string') out.push({ type: 'reasoning_signature', index, signature: r.signature });
        }
        break;
      }
      case 'contentBlockStop':
        this.open.delete(index);
        out.push({ type: 'block_end', index });
        break;
      case 'messageStop':
        this.stopRaw = j.stopReason;
        break;
      case 'metadata':
        this.usage = usageFromConverse(j.usage);
        out.push(...this.finish());
        break;
    }
    return out;
  }

  finish(): IrStreamPart[] {
    if (this.done || this.stopRaw === undefined) return [];
    this.done = true;
    return [{ type: 'finish', finish: finishOf(this.stopRaw), usage: this.usage ?? emptyUsage() }];
  }
}

/** Bedrock's errors: `{"message": ...}`, the exception's name in the x-amzn-errortype header. */
export function converseError(body: unknown): { message: string; type?: string } {
  const b = isObj(body) ? body : {};
  return { message: str(b.message) ?? str(b.Message) ?? 'the upstream refused the request' };
}
