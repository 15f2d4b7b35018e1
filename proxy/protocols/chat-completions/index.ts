import { z } from 'zod';
import type { Usage } from '../../ir/usage.js';
import { usageFromChat } from '../../ir/wire-usage.js';

export { usageFromChat };
import { hasObjectField, jsonKey, obj, parseObject, stringValueLength } from '../scan.js';
import type { ChatRequestInfo, ProtocolAdapter, StreamTap } from '../types.js';
import { encodeJsonEvent } from '../../sse/index.js';
import { parseWire } from '../validate.js';

/** OpenAI Chat Completions: the fields the gateway reads; everything else passes through. */
export const ChatCompletionsRequest = z.looseObject({
  model: z.string({ error: 'model is required (a string: the model code)' }).min(1, 'model must not be empty'),
  messages: z.array(z.unknown(), { error: 'messages is required (an array of messages)' }),
  stream: z.boolean({ error: 'stream must be a boolean' }).nullish(),
  max_tokens: z.number().int().nonnegative().nullish(),
  max_completion_tokens: z.number().int().nonnegative().nullish(),
  stream_options: z.looseObject({}).nullish(),
  n: z.number({ error: 'n must be a positive integer' }).int('n must be a positive integer').positive('n must be a positive integer').nullish(),
});

const TEXT_KEYS = ['"content":"', '"arguments":"', '"reasoning_content":"', '"refusal":"'].map(jsonKey);
const USAGE = jsonKey('"usage"');

/** OpenAI's in-stream error frame: {"error": {...}} (no [DONE] follows). */
function isErrorFrame(data: string): boolean {
  if (data.charCodeAt(0) !== 123 /* { */) return false;
  let i = 1;
  // JSON's whitespace; a line feed where the frame came in several data: lines.
  for (let c = data.charCodeAt(i); c === 32 || c === 9 || c === 10 || c === 13; c = data.charCodeAt(++i));
  return data.startsWith('"error"', i) && Boolean(parseObject(data)?.error);
}

class ChatTap implements StreamTap {
  usage: Usage | null = null;
  final = false;
  terminal = false;
  failed = false;
  textBytes = 0;

  ends(_event: string, data: string): boolean {
    return data === '[DONE]' || isErrorFrame(data);
  }

  event(event: string, data: string): void {
    if (this.ends(event, data)) {
      this.terminal = true;
      if (data !== '[DONE]') this.failed = true;
      return;
    }
    if (hasObjectField(data, USAGE)) {
      const u = usageFromChat(parseObject(data)?.usage);
      if (u) {
        this.usage = u;
        this.final = true;
      }
    }
    this.textBytes += stringValueLength(data, TEXT_KEYS);
  }
}

export const chatCompletions: ProtocolAdapter = {
  protocol: 'chat-completions',
  shape: 'openai',
  validate(body): ChatRequestInfo {
    const r = parseWire(ChatCompletionsRequest, body, 'invalid chat completions request');
    return { model: r.model, stream: r.stream ?? undefined, maxOutputTokens: r.max_completion_tokens ?? r.max_tokens ?? undefined, choices: r.n ?? 1 };
  },
  createTap: () => new ChatTap(),
  usageFromJson: (body) => usageFromChat(obj(body)?.usage),
  streamError(message, type = 'api_error') {
    return encodeJsonEvent({ error: { message, type, param: null, code: 'upstream_error' } });
  },
};
