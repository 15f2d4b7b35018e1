import type { IrFieldFate, IrRequest, IrResponse, IrStreamPart } from '../ir/chat.js';
import type { ChatProtocol } from '../ir/protocol.js';
import { ChatStreamEncoder, decodeChatRequest, encodeChatResponse } from './chat-completions/codec.js';
import { decodeMessagesRequest, encodeMessagesResponse, MessagesStreamEncoder } from './messages/codec.js';
import { errorTypeFor } from './error-types.js';
import { decodeResponsesRequest, encodeResponsesResponse, responseIdOf, ResponsesStreamEncoder } from './responses/codec.js';

/** A client request decoded for translation, with the encoders of its answer (they may need what the request said). */
export interface ClientDecoded {
  ir: IrRequest;
  fates: IrFieldFate[];
  /** A whole answer in the client's shape; `model` is the gateway's model code. */
  encode(r: IrResponse, model: string): Record<string, unknown>;
  streamEncoder(model: string): { encode(p: IrStreamPart): string };
  /** Responses only: the conversation the gateway keeps for translated answers (previous_response_id). */
  stored?: { previousId?: string; keep: boolean; idOf(irId: string): string };
}

/** A client protocol's side of translation: its request decoded, its errors encoded. */
export interface ClientChatCodec {
  decode(body: Record<string, unknown>): ClientDecoded;
  /** An upstream's error, re-rendered in this protocol's shape (the status is kept by the caller). */
  error(status: number, message: string): Record<string, unknown>;
}

const openaiError = (status: number, message: string) => ({ error: { message, type: errorTypeFor(status, false), param: null, code: 'upstream_error' } });

const CODECS: Record<ChatProtocol, ClientChatCodec> = {
  'chat-completions': {
    decode: (body) => ({ ...decodeChatRequest(body), encode: encodeChatResponse, streamEncoder: (model) => new ChatStreamEncoder(model) }),
    error: openaiError,
  },
  messages: {
    decode: (body) => ({ ...decodeMessagesRequest(body), encode: encodeMessagesResponse, streamEncoder: (model) => new MessagesStreamEncoder(model) }),
    error: (status, message) => ({ type: 'error', error: { type: errorTypeFor(status, true), message } }),
  },
  responses: {
    decode: (body) => {
      const d = decodeResponsesRequest(body);
      return {
        ir: d.ir,
        fates: d.fates,
        encode: (r, model) => encodeResponsesResponse(r, model, d.custom),
        streamEncoder: (model) => new ResponsesStreamEncoder(model, d.custom),
        stored: { keep: d.store, idOf: responseIdOf, ...(d.previousResponseId ? { previousId: d.previousResponseId } : {}) },
      };
    },
    error: openaiError,
  },
};

/** The client side of translation for a protocol. */
export function clientCodec(protocol: ChatProtocol): ClientChatCodec {
  return CODECS[protocol];
}
