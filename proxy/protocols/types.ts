import type { ChatProtocol } from '../ir/protocol.js';
import type { Usage } from '../ir/usage.js';
import type { ErrorShape } from '../ir/protocol.js';

export type { ChatProtocol };

/** What the chat path needs from the minimal wire validation of a request body. */
export interface ChatRequestInfo {
  model: string;
  /** The body's own `stream` value; undefined when absent. */
  stream: boolean | undefined;
  /** The body's output-token cap, when it has one. */
  maxOutputTokens: number | undefined;
  /** How many answers the request asks for (chat completions' `n`); each may use the whole cap. */
  choices: number;
}

/**
 * Watches one response stream of a protocol through the SSE parser's events, without touching
 * the bytes: usage as reported, whether the stream reached its terminal event, and how much
 * output text was delivered (the basis of an estimate when no usage arrives).
 */
export interface StreamTap {
  /**
   * Whether this event ends the stream (the one `event` would mark `terminal`). Cheap, because a
   * relay asks it of every event before their chunk is written, and reads them (`event`) after.
   */
  ends(event: string, data: string): boolean;
  event(event: string, data: string): void;
  /** Usage reported so far (may be partial until `final`). */
  usage: Usage | null;
  /** The usage is the upstream's final figure. */
  final: boolean;
  /** The protocol's terminal event was seen ([DONE], message_stop, response.completed...). */
  terminal: boolean;
  /** The terminal event was the protocol's own error (error frame, `error`, response.failed). */
  failed: boolean;
  /** Bytes of output text, tool arguments and reasoning delivered so far. */
  textBytes: number;
}

export interface ProtocolAdapter {
  protocol: ChatProtocol;
  shape: ErrorShape;
  /** Parses the minimal wire schema; throws a 400 GatewayError naming the field. */
  validate(body: Record<string, unknown>): ChatRequestInfo;
  createTap(): StreamTap;
  /** Usage of a non-streaming response body. */
  usageFromJson(body: unknown): Usage | null;
  /** Bytes of the protocol's in-stream error, written when a stream fails after it began. */
  streamError(message: string, type?: string): string;
}
