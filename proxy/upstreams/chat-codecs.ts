import type { IrRequest, IrResponse, IrStreamPart, TranslationError } from '../ir/chat.js';
import type { ChatProtocol } from '../ir/protocol.js';
import type { Usage } from '../ir/usage.js';
import { decodeMessagesResponse, encodeMessagesRequest, MessagesStreamDecoder } from './anthropic/messages-codec.js';
import { ChatStreamDecoder, chatRefusal, decodeChatResponse, encodeChatRequest } from './openai/chat-codec.js';
import { decodeResponsesResponse, encodeResponsesRequest, ResponsesStreamDecoder, responsesRefusal } from './openai/responses-codec.js';
import { speaks } from './registry.js';
import type { CompiledBackend } from './types.js';

/** An upstream SSE stream, decoded event by event into IR parts. */
export interface UpstreamStreamDecoder {
  event(event: string, data: string): IrStreamPart[];
  /** The stream ended (or the caller gives up): what is left, the finish part included. */
  finish(): IrStreamPart[];
  /** A terminal event (finish or error) was seen. */
  done: boolean;
  /** Usage reported so far. */
  readonly reported: Usage | null;
  /** Bytes of output text, reasoning and tool arguments seen. */
  outputBytes: number;
}

/** How a provider is reached through the IR: the protocol it is spoken to in, and its codec. */
export interface UpstreamChatCodec {
  op: ChatProtocol;
  encode(ir: IrRequest, model: string, maxOutputTokens: number): Record<string, unknown>;
  decode(body: unknown): IrResponse;
  streamDecoder(): UpstreamStreamDecoder;
  /** The message and type of an error answer in this wire's shape. */
  error(body: unknown): { message: string; type?: string };
  /** Why this wire cannot carry a request (a part or field it has no place for), if it cannot. */
  refusal?(ir: IrRequest): TranslationError | undefined;
}

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
function errorOf(body: unknown): { message: string; type?: string } {
  const e = isObj(body) && isObj(body.error) ? body.error : undefined;
  const message = e && typeof e.message === 'string' ? e.message : 'the upstream refused the request';
  return e && typeof e.type === 'string' ? { message, type: e.type } : { message };
}

const chatCodec = (openaiItself: boolean): UpstreamChatCodec => ({
  op: 'chat-completions',
  encode: (ir, model, cap) => encodeChatRequest({ ...ir, maxOutputTokens: cap }, model, { openaiItself }),
  decode: decodeChatResponse,
  streamDecoder: () => new ChatStreamDecoder(),
  error: errorOf,
  refusal: chatRefusal,
});

const messagesCodec: UpstreamChatCodec = {
  op: 'messages',
  encode: (ir, model, cap) => encodeMessagesRequest(ir, model, cap),
  decode: decodeMessagesResponse,
  streamDecoder: () => new MessagesStreamDecoder(),
  error: errorOf,
};

const responsesCodec: UpstreamChatCodec = {
  op: 'responses',
  encode: (ir, model, cap) => encodeResponsesRequest(ir, model, cap),
  decode: decodeResponsesResponse,
  streamDecoder: () => new ResponsesStreamDecoder(),
  error: errorOf,
  refusal: responsesRefusal,
};

/** The codec a backend is translated through, by what it speaks: Chat Completions, else Messages, else Responses. */
export function chatCodecFor(backend: CompiledBackend): UpstreamChatCodec | undefined {
  if (speaks(backend, 'chat-completions')) return chatCodec(backend.provider === 'openai');
  if (speaks(backend, 'messages')) return messagesCodec;
  if (speaks(backend, 'responses')) return responsesCodec;
  return undefined;
}
