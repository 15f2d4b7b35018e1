import type { IrFieldFate, IrRequest, IrResponse, IrStreamPart } from '../ir/chat.js';
import type { ChatProtocol } from '../ir/protocol.js';
import { ChatStreamEncoder, decodeChatRequest, encodeChatResponse } from './chat-completions/codec.js';
import { decodeMessagesRequest, encodeMessagesResponse, MessagesStreamEncoder } from './messages/codec.js';

/** A client protocol's side of translation: its request decoded, its answers and errors encoded. */
export interface ClientChatCodec {
  decode(body: Record<string, unknown>): { ir: IrRequest; fates: IrFieldFate[] };
  encode(r: IrResponse, model: string): Record<string, unknown>;
  streamEncoder(model: string, body: Record<string, unknown>): { encode(p: IrStreamPart): string };
  /** An upstream's error, re-rendered in this protocol's shape (the status is kept by the caller). */
  error(status: number, message: string): Record<string, unknown>;
}

/** Error types by status, in each shape: the upstream's own type names another protocol's vocabulary. */
function typeFor(status: number, anthropic: boolean): string {
  if (status === 400 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return anthropic ? 'not_found_error' : 'invalid_request_error';
  if (status === 413) return anthropic ? 'request_too_large' : 'invalid_request_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return anthropic ? 'overloaded_error' : 'api_error';
  return 'api_error';
}

const CODECS: Partial<Record<ChatProtocol, ClientChatCodec>> = {
  'chat-completions': {
    decode: decodeChatRequest,
    encode: encodeChatResponse,
    streamEncoder: (model, body) =>
      new ChatStreamEncoder(
        model,
        typeof body.stream_options === 'object' && body.stream_options !== null && (body.stream_options as Record<string, unknown>).include_usage === true,
      ),
    error: (status, message) => ({ error: { message, type: typeFor(status, false), param: null, code: 'upstream_error' } }),
  },
  messages: {
    decode: decodeMessagesRequest,
    encode: encodeMessagesResponse,
    streamEncoder: (model) => new MessagesStreamEncoder(model),
    error: (status, message) => ({ type: 'error', error: { type: typeFor(status, true), message } }),
  },
};

/** The client side of translation for a protocol, when the gateway translates it. */
export function clientCodec(protocol: ChatProtocol): ClientChatCodec | undefined {
  return CODECS[protocol];
}
