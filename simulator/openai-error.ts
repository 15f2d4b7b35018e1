import type { SimRequest } from './server.js';
import { sendJson } from './sim-stream.js';
import { simId } from './text.js';

/** An error in OpenAI's shape, `{"error":{"message","type","param","code"}}`, with a request id as OpenAI sends one. */
export function openaiError(
  r: SimRequest,
  status: number,
  message: string,
  type: string,
  code: string | null,
  param: string | null = null,
  headers: Record<string, string> = {},
): void {
  sendJson(r, status, { error: { message, type, param, code } }, { 'x-request-id': simId('req_'), ...headers });
}
