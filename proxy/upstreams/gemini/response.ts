import { emptyUsage, finishFrom, type IrFinish, type IrPart, type IrResponse, type IrStreamPart } from '../../ir/chat.js';
import { eventObject, isObj, str, type Json } from '../../ir/json.js';
import { tokenCount, type Usage } from '../../ir/usage.js';
import { toSignature } from './signature.js';

/**
 * Gemini's answers (generateContent JSON and each chunk of streamGenerateContent?alt=sse) as
 * the IR. A thought signature becomes a signature-only reasoning part just before the function
 * call it came on, or just after the text it came on (Gemini signs an answer's last text part, a
 * chunk of a text block already streaming: a block before it would split the text in two, and a
 * client that shows the last text block would show only the end). Either way it comes back on
 * that part (request.ts: a signature joins the part after it, else the part before).
 */

/** usageMetadata: promptTokenCount counts the cached part; thoughts are billed as output beside candidatesTokenCount. */
export function usageFromGemini(u: unknown): Usage | null {
  if (!isObj(u)) return null;
  const input = tokenCount(u.promptTokenCount) + tokenCount(u.toolUsePromptTokenCount);
  const thoughts = tokenCount(u.thoughtsTokenCount);
  return {
    inputTokens: input,
    cachedInputTokens: Math.min(input, tokenCount(u.cachedContentTokenCount)),
    cacheWriteTokens: 0,
    outputTokens: tokenCount(u.candidatesTokenCount) + thoughts,
    reasoningTokens: thoughts,
  };
}

const FINISH: Record<string, IrFinish['reason']> = {
  STOP: 'stop',
  MAX_TOKENS: 'length',
  SAFETY: 'content_filter',
  RECITATION: 'content_filter',
  BLOCKLIST: 'content_filter',
  PROHIBITED_CONTENT: 'content_filter',
  SPII: 'content_filter',
  IMAGE_SAFETY: 'content_filter',
  MALFORMED_FUNCTION_CALL: 'error',
  UNEXPECTED_TOOL_CALL: 'error',
};

/** The finish of a candidate (or of a prompt Gemini blocked before answering); a STOP after function calls is a tool-call stop. */
function finishOf(candidate: Json | undefined, body: Json, calledTools: boolean): IrFinish | undefined {
  const raw = candidate?.finishReason;
  if (raw === undefined || raw === null || raw === 'FINISH_REASON_UNSPECIFIED') {
    const blocked = isObj(body.promptFeedback) ? str(body.promptFeedback.blockReason) : undefined;
    return blocked ? { reason: 'content_filter', raw: blocked } : undefined;
  }
  const f = finishFrom(FINISH, raw);
  return calledTools && f.reason === 'stop' ? { reason: 'tool_calls', raw: f.raw } : f;
}

let calls = 0;
/** Gemini names calls by function; the IR needs an id for the result to answer (kept when Gemini gave one). */
const callId = (fc: Json) => str(fc.id) ?? `call_${Date.now().toString(36)}${(calls = (calls + 1) % 0x7fffffff).toString(36)}`;

const candidateOf = (b: Json): Json | undefined => (Array.isArray(b.candidates) && isObj(b.candidates[0]) ? b.candidates[0] : undefined);
const partsOf = (c: Json | undefined): Json[] =>
  c && isObj(c.content) && Array.isArray(c.content.parts) ? (c.content.parts as unknown[]).filter((p): p is Json => isObj(p)) : [];

export function decodeGeminiResponse(body: unknown): IrResponse {
  const b = isObj(body) ? body : {};
  const candidate = candidateOf(b);
  const content: IrPart[] = [];
  let calledTools = false;
  for (const p of partsOf(candidate)) {
    const sig = str(p.thoughtSignature);
    if (p.thought === true) {
      content.push({ type: 'reasoning', text: str(p.text) ?? '', ...(sig ? { signature: toSignature(sig) } : {}) });
      continue;
    }
    const carrier: IrPart[] = sig ? [{ type: 'reasoning', text: '', signature: toSignature(sig) }] : [];
    if (isObj(p.functionCall)) {
      calledTools = true;
      content.push(...carrier, {
        type: 'tool_call',
        id: callId(p.functionCall),
        name: str(p.functionCall.name) ?? '',
        arguments: JSON.stringify(p.functionCall.args ?? {}),
      });
    } else content.push(...(typeof p.text === 'string' && p.text !== '' ? [{ type: 'text' as const, text: p.text }] : []), ...carrier);
  }
  return {
    id: str(b.responseId) ?? `gw${Date.now().toString(36)}`,
    content,
    finish: finishOf(candidate, b, calledTools) ?? { reason: 'other', raw: '' },
    usage: usageFromGemini(b.usageMetadata) ?? emptyUsage(),
  };
}

/**
 * A streamGenerateContent?alt=sse stream: every event is a whole GenerateContentResponse with
 * the next parts; the one with a finishReason carries the final usageMetadata and ends it.
 * Function calls come whole, each its own block.
 */
export class GeminiStreamDecoder {
  private started = false;
  private next = 0;
  private open: { kind: 'text' | 'reasoning'; index: number } | undefined;
  /** The signature of the open text block, sent on a block of its own once that block ends. */
  private textSignature: string | undefined;
  private usage: Usage | null = null;
  private calledTools = false;
  done = false;
  outputBytes = 0;

  get reported(): Usage | null {
    return this.usage;
  }

  private close(out: IrStreamPart[]): void {
    if (this.open) out.push({ type: 'block_end', index: this.open.index });
    this.open = undefined;
    const sig = this.textSignature;
    this.textSignature = undefined;
    if (sig) this.signature(out, sig);
  }

  private block(out: IrStreamPart[], kind: 'text' | 'reasoning'): number {
    if (this.open?.kind === kind) return this.open.index;
    this.close(out);
    this.open = { kind, index: this.next++ };
    return this.open.index;
  }

  /** A signature on its own block (the open block ended first). */
  private signature(out: IrStreamPart[], sig: string): void {
    this.close(out);
    const index = this.next++;
    out.push({ type: 'reasoning_signature', index, signature: toSignature(sig) }, { type: 'block_end', index });
  }

  event(_event: string, data: string): IrStreamPart[] {
    if (this.done) return [];
    const j = eventObject(data);
    if (!j) return [];
    if (isObj(j.error)) {
      this.done = true;
      return [{ type: 'error', message: str(j.error.message) ?? 'upstream error', ...(str(j.error.status) ? { errorType: str(j.error.status)! } : {}) }];
    }
    const out: IrStreamPart[] = [];
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', id: str(j.responseId) ?? `gw${Date.now().toString(36)}` });
    }
    if (isObj(j.usageMetadata)) this.usage = usageFromGemini(j.usageMetadata);
    const candidate = candidateOf(j);
    for (const p of partsOf(candidate)) {
      const sig = str(p.thoughtSignature);
      const text = str(p.text) ?? '';
      if (p.thought === true) {
        const index = this.block(out, 'reasoning');
        this.outputBytes += text.length;
        if (text) out.push({ type: 'reasoning', index, delta: text });
        if (sig) out.push({ type: 'reasoning_signature', index, signature: toSignature(sig) });
        continue;
      }
      if (isObj(p.functionCall)) {
        this.close(out);
        if (sig) this.signature(out, sig);
        this.calledTools = true;
        const index = this.next++;
        const args = JSON.stringify(p.functionCall.args ?? {});
        this.outputBytes += args.length;
        out.push(
          { type: 'tool_call_start', index, id: callId(p.functionCall), name: str(p.functionCall.name) ?? '' },
          { type: 'tool_call_delta', index, arguments: args },
          { type: 'block_end', index },
        );
      } else {
        if (text) {
          const index = this.block(out, 'text');
          this.outputBytes += text.length;
          out.push({ type: 'text', index, delta: text });
        }
        if (sig && this.open?.kind === 'text') this.textSignature = sig;
        else if (sig) this.signature(out, sig);
      }
    }
    const finish = finishOf(candidate, j, this.calledTools);
    if (finish) {
      this.close(out);
      this.done = true;
      out.push({ type: 'finish', finish, usage: this.usage ?? emptyUsage() });
    }
    return out;
  }

  /** Gemini has no terminal event but the finishReason: a stream that ended without one was cut (the caller reports it). */
  finish(): IrStreamPart[] {
    return [];
  }
}

export function geminiError(body: unknown): { message: string; type?: string } {
  const e = isObj(body) && isObj(body.error) ? body.error : undefined;
  const message = e && typeof e.message === 'string' ? e.message : 'the upstream refused the request';
  return e && typeof e.status === 'string' ? { message, type: e.status } : { message };
}
