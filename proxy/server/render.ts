import type { ServerResponse } from 'node:http';
import { GatewayError } from './errors.js';

/** Which error shape a route answers in. Image and video endpoints use the OpenAI shape. */
export type ErrorShape = 'openai' | 'anthropic';

export function errorBody(err: GatewayError, shape: ErrorShape): string {
  if (shape === 'anthropic') {
    return JSON.stringify({ type: 'error', error: { type: err.typeFor('anthropic'), message: err.message } });
  }
  return JSON.stringify({
    error: { message: err.message, type: err.typeFor('openai'), param: err.opts.param ?? null, code: err.code },
  });
}

export function sendError(res: ServerResponse, err: GatewayError, shape: ErrorShape, requestId?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(err, shape);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  };
  if (requestId) headers['x-request-id'] = requestId;
  if (err.opts.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.opts.retryAfterSeconds);
  res.writeHead(err.status, headers);
  res.end(body);
}

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}
