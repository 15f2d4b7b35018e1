import type { IrRequest, IrResponse, IrStreamPart, TranslationError } from '../ir/chat.js';
import type { ChatProtocol } from '../ir/protocol.js';
import type { Usage } from '../ir/usage.js';
import { decodeMessagesResponse, encodeMessagesRequest, MessagesStreamDecoder } from './anthropic/messages-codec.js';
import { ChatStreamDecoder, chatRefusal, decodeChatResponse, encodeChatRequest } from './openai/chat-codec.js';
import { decodeResponsesResponse, encodeResponsesRequest, MIN_OUTPUT_CAP, ResponsesStreamDecoder, responsesRefusal } from './openai/responses-codec.js';
import { conversePath } from './bedrock/index.js';
import { converseRefusal, encodeConverseRequest } from './bedrock/request.js';
import { converseError, ConverseStreamDecoder, decodeConverseResponse } from './bedrock/response.js';
import { geminiPath } from './gemini/index.js';
import { isClaude, VERTEX_ANTHROPIC_VERSION, vertexPath } from './vertex/index.js';
import { encodeGeminiRequest } from './gemini/request.js';
import { withoutGeminiReasoning } from './gemini/signature.js';
import { decodeGeminiResponse, GeminiStreamDecoder, geminiError } from './gemini/response.js';
import { speaks } from './registry.js';
import type { CompiledBackend } from './types.js';

/**
 * The smallest output cap every wire takes: a request is held for at least this many output
 * tokens, so that a wire that raises a smaller cap to its minimum (Responses) stays within the hold.
 */
export const MIN_UPSTREAM_OUTPUT_CAP = MIN_OUTPUT_CAP;

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
  /** A stream that is not SSE (codec.streamType): its raw bytes, chunk by chunk. */
  bytes?(chunk: Buffer): IrStreamPart[];
}

/** How a provider is reached through the IR: the protocol it is spoken to in, and its codec. */
export interface UpstreamChatCodec {
  op: ChatProtocol;
  encode(ir: IrRequest, model: string, maxOutputTokens: number): Record<string, unknown>;
  decode(body: unknown): IrResponse;
  streamDecoder(): UpstreamStreamDecoder;
  /** The message and type of an error answer in this wire's shape. */
  error(body: unknown): { message: string; type?: string };
  /** Client fields translation would otherwise drop that this wire carries (cache breakpoints). */
  carries?: ReadonlySet<string>;
  /** Why this wire cannot carry a request (a part or field it has no place for), if it cannot. */
  refusal?(ir: IrRequest): TranslationError | undefined;
  /** The call's path when it is not provider.path(backend, op): Gemini names the model and the method in it. */
  path?(backend: CompiledBackend, stream: boolean): string;
  /** Content type of the stream when it is not SSE (Bedrock's binary event stream). */
  streamType?: RegExp;
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

const BREAKPOINTS: ReadonlySet<string> = new Set(['cache_control']);

const messagesCodec: UpstreamChatCodec = {
  op: 'messages',
  encode: (ir, model, cap) => encodeMessagesRequest(ir, model, cap),
  decode: decodeMessagesResponse,
  streamDecoder: () => new MessagesStreamDecoder(),
  error: errorOf,
  carries: BREAKPOINTS,
};

const responsesCodec: UpstreamChatCodec = {
  op: 'responses',
  encode: (ir, model, cap) => encodeResponsesRequest(ir, model, cap),
  decode: decodeResponsesResponse,
  streamDecoder: () => new ResponsesStreamDecoder(),
  error: errorOf,
  refusal: responsesRefusal,
};

/** Gemini's generateContent (AI Studio); `op` is unused, the path names the method. */
const geminiCodec: UpstreamChatCodec = {
  op: 'chat-completions',
  encode: (ir, model, cap) => encodeGeminiRequest(ir, model, cap),
  decode: decodeGeminiResponse,
  streamDecoder: () => new GeminiStreamDecoder(),
  error: geminiError,
  path: geminiPath,
};

/** Bedrock's Converse; streams are AWS event streams, not SSE. */
const converseCodec: UpstreamChatCodec = {
  op: 'chat-completions',
  encode: (ir, model, cap) => encodeConverseRequest(ir, model, cap),
  decode: decodeConverseResponse,
  streamDecoder: () => new ConverseStreamDecoder(),
  error: converseError,
  path: conversePath,
  streamType: /^application\/vnd\.amazon\.eventstream/i,
  refusal: converseRefusal,
  carries: BREAKPOINTS,
};

/** Vertex AI: Gemini through the Gemini codec at Vertex's paths. */
const vertexGeminiCodec: UpstreamChatCodec = { ...geminiCodec, path: vertexPath };

/** Claude on Vertex: the Messages body without `model` (it is in the path), with Vertex's anthropic_version. */
const vertexClaudeCodec: UpstreamChatCodec = {
  ...messagesCodec,
  encode: (ir, model, cap) => {
    // A thought signature Gemini made is refused by Claude: a conversation that moved here leaves it out.
    const { model: _inPath, ...body } = encodeMessagesRequest(withoutGeminiReasoning(ir), model, cap);
    return { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...body };
  },
  path: vertexPath,
};

/** Providers with a wire of their own (the codec may depend on the backend: Vertex serves Gemini and Claude). */
const OWN_CODECS: Record<string, (backend: CompiledBackend) => UpstreamChatCodec | undefined> = {
  gemini: () => geminiCodec,
  bedrock: () => converseCodec,
  vertex: (backend) => (isClaude(backend) ? vertexClaudeCodec : vertexGeminiCodec),
};

/**
 * The codec a backend is translated through: its provider's own wire (Gemini, Bedrock, Vertex),
 * else by what it speaks: Messages, else Chat Completions, else Responses.
 */
export function chatCodecFor(backend: CompiledBackend): UpstreamChatCodec | undefined {
  const own = OWN_CODECS[backend.provider];
  if (own) return own(backend);
  // Messages first where a server offers it beside Chat Completions: thinking and its signatures travel there.
  if (speaks(backend, 'messages')) return messagesCodec;
  if (speaks(backend, 'chat-completions')) return chatCodec(backend.provider === 'openai' || backend.provider === 'azure-openai');
  if (speaks(backend, 'responses')) return responsesCodec;
  return undefined;
}
