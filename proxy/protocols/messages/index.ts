import { z } from 'zod';
import type { Usage } from '../../ir/usage.js';
import { usageFromMessages } from '../../ir/wire-usage.js';

export { usageFromMessages };
import { eventType, jsonKey, obj, parseObject, stringValueLength } from '../scan.js';
import type { ChatRequestInfo, ProtocolAdapter, StreamTap } from '../types.js';
import { encodeJsonEvent } from '../../sse/index.js';
import { parseWire } from '../validate.js';

/** Anthropic Messages: the fields the gateway reads; everything else passes through. */
export const MessagesRequest = z.looseObject({
  model: z.string({ error: 'model: Field required (a string: the model code)' }).min(1, 'model must not be empty'),
  messages: z.array(z.unknown(), { error: 'messages: Field required (an array of messages)' }),
  max_tokens: z
    .number({ error: 'max_tokens: Field required (a positive integer)' })
    .int('max_tokens must be an integer')
    .positive('max_tokens must be at least 1'),
  stream: z.boolean({ error: 'stream must be a boolean' }).optional(),
});

export const CountTokensRequest = z.looseObject({
  model: z.string({ error: 'model: Field required (a string: the model code)' }).min(1, 'model must not be empty'),
  messages: z.array(z.unknown(), { error: 'messages: Field required (an array of messages)' }),
});

const TEXT_KEYS = ['"text":"', '"partial_json":"', '"thinking":"'].map(jsonKey);

class MessagesTap implements StreamTap {
  usage: Usage | null = null;
  final = false;
  terminal = false;
  failed = false;
  textBytes = 0;

  ends(event: string, data: string): boolean {
    const type = eventType(event, data);
    return type === 'message_stop' || type === 'error';
  }

  event(event: string, data: string): void {
    switch (eventType(event, data)) {
      case 'content_block_delta':
        this.textBytes += stringValueLength(data, TEXT_KEYS);
        return;
      case 'message_start':
        this.usage = usageFromMessages(obj(parseObject(data)?.message)?.usage, this.usage);
        return;
      case 'message_delta': {
        const u = usageFromMessages(parseObject(data)?.usage, this.usage);
        if (u) {
          this.usage = u;
          this.final = true;
        }
        return;
      }
      case 'message_stop':
        this.terminal = true;
        return;
      case 'error':
        this.terminal = true;
        this.failed = true;
        return;
      default:
    }
  }
}

export const messages: ProtocolAdapter = {
  protocol: 'messages',
  shape: 'anthropic',
  validate(body): ChatRequestInfo {
    const r = parseWire(MessagesRequest, body, 'invalid messages request');
    return { model: r.model, stream: r.stream, maxOutputTokens: r.max_tokens, choices: 1 };
  },
  createTap: () => new MessagesTap(),
  usageFromJson: (body) => usageFromMessages(obj(body)?.usage),
  streamError(message, type = 'api_error') {
    return encodeJsonEvent({ type: 'error', error: { type, message } }, 'error');
  },
};
