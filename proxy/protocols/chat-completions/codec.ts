import {
  fatesOf,
  TranslationError,
  type FieldRule,
  type IrFieldFate,
  type IrFinish,
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
import { chatUsageOf } from '../../ir/wire-usage.js';
import { encodeJsonEvent } from '../../sse/index.js';

/**
 * OpenAI Chat Completions as a client protocol in front of a backend that speaks another one:
 * the request decoded to the IR, the answer (JSON or SSE) encoded from it. Fields the IR cannot
 * carry are listed with their fate (FATES): refused when dropping them would change what the
 * model does, dropped and named when they are hints.
 */

/** Fields of a Chat Completions request that the IR does not carry, and why. */
export const CHAT_FATES: Record<string, FieldRule> = {
  n: { fate: 'refused', why: 'more than one answer per request is not available through translation', harmless: (v) => v === 1 },
  logprobs: { fate: 'refused', why: 'token log-probabilities are not available from this backend', harmless: (v) => v === false },
  top_logprobs: { fate: 'refused', why: 'token log-probabilities are not available from this backend' },
  audio: { fate: 'refused', why: 'audio output is not available from this backend' },
  modalities: {
    fate: 'refused',
    why: 'output modalities other than text are not available from this backend',
    harmless: (v) => JSON.stringify(v) === '["text"]',
  },
  web_search_options: { fate: 'refused', why: 'hosted web search is not available from this backend' },
  prediction: { fate: 'dropped', why: 'predicted outputs are an OpenAI latency hint' },
  logit_bias: { fate: 'refused', why: 'logit bias is not available from this backend' },
  seed: { fate: 'dropped', why: 'a sampling seed is a best-effort hint' },
  presence_penalty: { fate: 'dropped', why: 'a sampling hint this backend does not take' },
  frequency_penalty: { fate: 'dropped', why: 'a sampling hint this backend does not take' },
  service_tier: { fate: 'dropped', why: 'an OpenAI scheduling hint' },
  store: { fate: 'dropped', why: 'OpenAI-side storage' },
  metadata: { fate: 'dropped', why: 'OpenAI-side metadata' },
  prompt_cache_key: { fate: 'dropped', why: 'an OpenAI caching hint' },
  safety_identifier: { fate: 'dropped', why: 'an OpenAI abuse-monitoring hint' },
  verbosity: { fate: 'dropped', why: 'an OpenAI style hint' },
  functions: { fate: 'refused', why: 'the legacy functions parameter: send tools' },
  function_call: { fate: 'refused', why: 'the legacy function_call parameter: send tool_choice' },
};

/** Members the decoder maps (the rest of the request is looked up in CHAT_FATES, else dropped as unknown). */
export const CHAT_MAPPED = [
  'model',
  'messages',
  'stream',
  'stream_options',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'stop',
  'reasoning_effort',
  'response_format',
  'user',
] as const;
const MAPPED = new Set<string>(CHAT_MAPPED);

function contentParts(content: unknown, where: string): IrPart[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  if (content === null || content === undefined) return [];
  if (!Array.isArray(content)) throw new TranslationError(`${where} must be a string or an array of content parts`, where);
  return content.flatMap((p: unknown, i): IrPart[] => {
    if (!isObj(p)) throw new TranslationError(`${where}[${i}] must be an object`, where);
    if (p.type === 'text' || p.type === 'refusal') return [{ type: 'text', text: str(p.text) ?? str(p.refusal) ?? '' }];
    if (p.type === 'image_url') {
      const url = str(isObj(p.image_url) ? p.image_url.url : p.image_url);
      if (!url) throw new TranslationError(`${where}[${i}].image_url.url is required`, where);
      const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
      return [m ? { type: 'image', mediaType: m[1]!, data: m[2]! } : { type: 'image', url }];
    }
    if (p.type === 'file' && isObj(p.file)) {
      const m = /^data:([^;,]+);base64,(.*)$/s.exec(str(p.file.file_data) ?? '');
      if (!m) throw new TranslationError(`${where}[${i}].file: only files given inline (file_data) are available through translation`, where);
      return [{ type: 'document', mediaType: m[1]!, data: m[2]!, ...(str(p.file.filename) ? { filename: p.file.filename as string } : {}) }];
    }
    throw new TranslationError(`${where}[${i}]: content part type "${String(p.type)}" is not available through translation`, where);
  });
}

function toolChoiceOf(v: unknown): IrToolChoice | undefined {
  if (v === undefined || v === null) return undefined;
  if (v === 'auto' || v === 'none' || v === 'required') return { type: v };
  if (isObj(v) && isObj(v.function) && typeof v.function.name === 'string') return { type: 'tool', name: v.function.name };
  throw new TranslationError('tool_choice must be "auto", "none", "required" or {"type":"function","function":{"name":...}}', 'tool_choice');
}

/** A Chat Completions request body as the IR, and the fate of each field the IR does not carry. */
export function decodeChatRequest(body: Json): { ir: IrRequest; fates: IrFieldFate[] } {
  const fates = fatesOf(body, MAPPED, CHAT_FATES, 'not part of the Chat Completions API this gateway translates');
  const system: string[] = [];
  const messages: IrMessage[] = [];
  const push = (role: IrMessage['role'], parts: IrPart[]) => {
    const last = messages.at(-1);
    // Tool results answer the assistant turn before them; consecutive ones form one user turn.
    if (last && last.role === role && role === 'user' && parts.every((p) => p.type === 'tool_result') && last.content.every((p) => p.type === 'tool_result')) {
      last.content.push(...parts);
    } else messages.push({ role, content: parts });
  };
  const list = Array.isArray(body.messages) ? body.messages : [];
  list.forEach((m: unknown, i) => {
    const where = `messages[${i}]`;
    if (!isObj(m)) throw new TranslationError(`${where} must be an object`, 'messages');
    switch (m.role) {
      case 'system':
      case 'developer': {
        const text = contentParts(m.content, `${where}.content`)
          .map((p) => (p.type === 'text' ? p.text : ''))
          .join('\n');
        if (text) system.push(text);
        return;
      }
      case 'user':
        push('user', contentParts(m.content, `${where}.content`));
        return;
      case 'assistant': {
        const parts: IrPart[] = [];
        const reasoning = str(m.reasoning_content);
        if (reasoning) parts.push({ type: 'reasoning', text: reasoning });
        parts.push(...contentParts(m.content, `${where}.content`));
        if (Array.isArray(m.tool_calls)) {
          for (const c of m.tool_calls as unknown[]) {
            if (!isObj(c) || !isObj(c.function)) throw new TranslationError(`${where}.tool_calls: each call needs a function`, 'messages');
            parts.push({ type: 'tool_call', id: str(c.id) ?? '', name: str(c.function.name) ?? '', arguments: str(c.function.arguments) ?? '{}' });
          }
        }
        push('assistant', parts);
        return;
      }
      case 'tool': {
        const content = contentParts(m.content, `${where}.content`)
          .map((p) => (p.type === 'text' ? p.text : ''))
          .join('');
        push('user', [{ type: 'tool_result', callId: str(m.tool_call_id) ?? '', content }]);
        return;
      }
      default:
        throw new TranslationError(`${where}.role "${String(m.role)}" is not one of system, developer, user, assistant, tool`, 'messages');
    }
  });
  const tools: IrTool[] = [];
  if (Array.isArray(body.tools)) {
    body.tools.forEach((t: unknown, i) => {
      if (!isObj(t) || t.type !== 'function' || !isObj(t.function))
        throw new TranslationError(`tools[${i}]: only function tools are available through translation`, 'tools');
      const f = t.function;
      tools.push({
        name: str(f.name) ?? '',
        ...(typeof f.description === 'string' ? { description: f.description } : {}),
        parameters: isObj(f.parameters) ? f.parameters : { type: 'object', properties: {} },
      });
    });
  }
  const cap = typeof body.max_completion_tokens === 'number' ? body.max_completion_tokens : typeof body.max_tokens === 'number' ? body.max_tokens : undefined;
  const stop = typeof body.stop === 'string' ? [body.stop] : Array.isArray(body.stop) ? body.stop.filter((s): s is string => typeof s === 'string') : undefined;
  const rf = isObj(body.response_format) ? body.response_format : undefined;
  const js = rf && isObj(rf.json_schema) ? rf.json_schema : undefined;
  const effort = str(body.reasoning_effort);
  const toolChoice = toolChoiceOf(body.tool_choice);
  const ir: IrRequest = {
    system,
    messages,
    tools,
    stream: body.stream === true,
    ...(toolChoice ? { toolChoice } : {}),
    ...(typeof body.parallel_tool_calls === 'boolean' ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    ...(cap !== undefined ? { maxOutputTokens: cap } : {}),
    ...(typeof body.temperature === 'number' ? { temperature: body.temperature } : {}),
    ...(typeof body.top_p === 'number' ? { topP: body.top_p } : {}),
    ...(stop?.length ? { stop } : {}),
    ...(effort === 'minimal' || effort === 'low' || effort === 'medium' || effort === 'high' ? { reasoning: { effort } } : {}),
    ...(rf?.type === 'json_object' ? { responseFormat: { type: 'json_object' as const } } : {}),
    ...(rf?.type === 'json_schema' && js && isObj(js.schema)
      ? {
          responseFormat: {
            type: 'json_schema' as const,
            name: str(js.name) ?? 'answer',
            schema: js.schema,
            ...(typeof js.strict === 'boolean' ? { strict: js.strict } : {}),
          },
        }
      : {}),
    ...(typeof body.user === 'string' ? { user: body.user } : {}),
  };
  return { ir, fates };
}

const FINISH: Record<IrFinish['reason'], string> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool_calls',
  content_filter: 'content_filter',
  error: 'stop',
  other: 'stop',
};

/** A whole answer in the Chat Completions shape. `model` is the gateway's model code. */
export function encodeChatResponse(r: IrResponse, model: string): Json {
  const text = r.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
  const reasoning = r.content.map((p) => (p.type === 'reasoning' ? p.text : '')).join('');
  const calls = r.content.flatMap((p) => (p.type === 'tool_call' ? [{ id: p.id, type: 'function', function: { name: p.name, arguments: p.arguments } }] : []));
  return {
    id: r.id.startsWith('chatcmpl') ? r.id : `chatcmpl-${r.id}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text === '' && calls.length ? null : text,
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          ...(calls.length ? { tool_calls: calls } : {}),
          refusal: null,
        },
        logprobs: null,
        finish_reason: FINISH[r.finish.reason],
      },
    ],
    usage: chatUsageOf(r.usage),
  };
}

/**
 * IR stream parts to Chat Completions chunks. Tool calls are numbered in the order they start
 * (the `index` of tool_calls deltas); the finish chunk, the usage chunk and [DONE] come from
 * finish(). The usage chunk comes whether or not the client set `stream_options.include_usage`:
 * the contract has the last content frame carry usage, and a passthrough stream carries it too
 * (the gateway sets include_usage upstream, to charge on it).
 */
export class ChatStreamEncoder {
  private id = `chatcmpl-${Date.now().toString(36)}`;
  private readonly created = Math.floor(Date.now() / 1000);
  private started = false;
  private readonly toolIndex = new Map<number, number>();

  constructor(private readonly model: string) {}

  private chunk(delta: Json, finish: string | null = null): string {
    return encodeJsonEvent({
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  }

  /** The bytes for one part (may be empty). A finish part gives the final bytes: send them last, after the charge. */
  encode(p: IrStreamPart): string {
    let out = '';
    if (!this.started && p.type !== 'error') {
      this.started = true;
      if (p.type === 'start') this.id = p.id.startsWith('chatcmpl') ? p.id : `chatcmpl-${p.id}`;
      out += this.chunk({ role: 'assistant', content: '' });
    }
    switch (p.type) {
      case 'text':
        return out + this.chunk({ content: p.delta });
      case 'reasoning':
        return out + this.chunk({ reasoning_content: p.delta });
      case 'tool_call_start': {
        const i = this.toolIndex.size;
        this.toolIndex.set(p.index, i);
        return out + this.chunk({ tool_calls: [{ index: i, id: p.id, type: 'function', function: { name: p.name, arguments: '' } }] });
      }
      case 'tool_call_delta':
        return out + this.chunk({ tool_calls: [{ index: this.toolIndex.get(p.index) ?? 0, function: { arguments: p.arguments } }] });
      case 'finish':
        return out + this.finish(p.finish, p.usage);
      case 'error':
        return `${out}${encodeJsonEvent({ error: { message: p.message, type: errorTypeFor(errorStatus(p.errorType), false), param: null, code: 'upstream_error' } })}`;
      default:
        return out;
    }
  }

  private finish(f: IrFinish, usage: Usage): string {
    let out = this.chunk({}, FINISH[f.reason]);
    out += encodeJsonEvent({
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices: [],
      usage: chatUsageOf(usage),
    });
    return `${out}data: [DONE]\n\n`;
  }
}
