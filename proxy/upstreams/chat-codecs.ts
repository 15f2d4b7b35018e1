import type { IrRequest, IrResponse, IrStreamPart } from '../ir/chat.js';
import type { ChatProtocol } from '../ir/protocol.js';
import type { Usage } from '../ir/usage.js';
import { decodeMessagesResponse, encodeMessagesRequest, MessagesStreamDecoder } from './anthropic/messages-codec.js';
import { ChatStreamDecoder, decodeChatResponse, encodeChatRequest } from './openai/chat-codec.js';
import type { Provider } from './types.js';

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
});

const messagesCodec: UpstreamChatCodec = {
  op: 'messages',
  encode: (ir, model, cap) => encodeMessagesRequest(ir, model, cap),
  decode: decodeMessagesResponse,
  streamDecoder: () => new MessagesStreamDecoder(),
  error: errorOf,
};

/** The codec a provider is translated through, by what it speaks (Messages first for Anthropic, Chat Completions else). */
export function chatCodecFor(provider: Provider): UpstreamChatCodec | undefined {
  if (provider.speaks.has('messages')) return messagesCodec;
  if (provider.speaks.has('chat-completions')) return chatCodec(provider.name === 'openai');
  return undefined;
}
