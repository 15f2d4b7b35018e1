import { z } from 'zod';
import type { Usage } from '../../ir/usage.js';
import { usageFromResponses } from '../../ir/wire-usage.js';

export { usageFromResponses };
import { eventType, jsonKey, obj, parseObject, stringValueLength } from '../scan.js';
import type { ChatRequestInfo, ProtocolAdapter, StreamTap } from '../types.js';
import { encodeJsonEvent } from '../../sse/index.js';
import { parseWire } from '../validate.js';

/** OpenAI Responses: the fields the gateway reads; everything else passes through. */
export const ResponsesRequest = z.looseObject({
  model: z.string({ error: 'model is required (a string: the model code)' }).min(1, 'model must not be empty'),
  input: z.union([z.string(), z.array(z.unknown())], { error: 'input must be a string or an array of items' }).optional(),
  stream: z.boolean({ error: 'stream must be a boolean' }).nullish(),
  max_output_tokens: z.number().int().nonnegative().nullish(),
});

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);
const TEXT_KEYS = ['"delta":"'].map(jsonKey);

/** The event type from `event:`, else from the data's "type" (servers that omit event lines). */
class ResponsesTap implements StreamTap {
  usage: Usage | null = null;
  final = false;
  terminal = false;
  failed = false;
  textBytes = 0;

  ends(event: string, data: string): boolean {
    const type = eventType(event, data);
    return TERMINAL.has(type) || type === 'error';
  }

  event(event: string, data: string): void {
    const type = eventType(event, data);
    if (type.endsWith('.delta')) {
      this.textBytes += stringValueLength(data, TEXT_KEYS);
      return;
    }
    if (TERMINAL.has(type)) {
      this.terminal = true;
      if (type === 'response.failed') this.failed = true;
      const u = usageFromResponses(obj(parseObject(data)?.response)?.usage);
      if (u) {
        this.usage = u;
        this.final = true;
      }
    } else if (type === 'error') {
      this.terminal = true;
      this.failed = true;
    }
  }
}

let seq = 0;
export const responses: ProtocolAdapter = {
  protocol: 'responses',
  shape: 'openai',
  validate(body): ChatRequestInfo {
    const r = parseWire(ResponsesRequest, body, 'invalid responses request');
    return { model: r.model, stream: r.stream ?? undefined, maxOutputTokens: r.max_output_tokens ?? undefined, choices: 1 };
  },
  createTap: () => new ResponsesTap(),
  usageFromJson: (body) => usageFromResponses(obj(body)?.usage),
  streamError(message, type = 'api_error') {
    // The Responses `error` event, plus an `error` object the official SDKs turn into an APIError.
    const data = { type: 'error', code: 'upstream_error', message, param: null, sequence_number: ++seq, error: { type, code: 'upstream_error', message } };
    return encodeJsonEvent(data, 'error');
  },
};
