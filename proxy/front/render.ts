import type { ServerResponse } from 'node:http';
import type { ErrorCode, GatewayError } from '../../kernel/errors.js';
import type { ErrorShape } from '../ir/protocol.js';

export type { ErrorShape };

const STATUS: Record<ErrorCode, number> = {
  invalid_request: 400,
  invalid_json: 400,
  unsupported_media_type: 415,
  body_too_large: 413,
  request_timeout: 408,
  missing_api_key: 401,
  invalid_api_key: 401,
  insufficient_credits: 402,
  spend_limit_reached: 402,
  client_restricted: 403,
  forbidden: 403,
  conflict: 409,
  model_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  upgrade_required: 426,
  rate_limited: 429,
  not_implemented: 501,
  upstream_unavailable: 502,
  upstream_timeout: 504,
  upstream_error: 502,
  not_ready: 503,
  unauthorized_admin: 401,
  internal_error: 500,
};

/** OpenAI's `error.type` values and Anthropic's `error.type` values for each code. */
const TYPES: Record<ErrorCode, { openai: string; anthropic: string }> = {
  invalid_request: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  invalid_json: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  unsupported_media_type: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  body_too_large: { openai: 'invalid_request_error', anthropic: 'request_too_large' },
  request_timeout: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  missing_api_key: { openai: 'authentication_error', anthropic: 'authentication_error' },
  invalid_api_key: { openai: 'authentication_error', anthropic: 'authentication_error' },
  insufficient_credits: { openai: 'insufficient_quota', anthropic: 'billing_error' },
  spend_limit_reached: { openai: 'insufficient_quota', anthropic: 'billing_error' },
  client_restricted: { openai: 'permission_error', anthropic: 'permission_error' },
  forbidden: { openai: 'permission_error', anthropic: 'permission_error' },
  conflict: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  model_not_found: { openai: 'invalid_request_error', anthropic: 'not_found_error' },
  not_found: { openai: 'invalid_request_error', anthropic: 'not_found_error' },
  method_not_allowed: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  upgrade_required: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  rate_limited: { openai: 'rate_limit_error', anthropic: 'rate_limit_error' },
  not_implemented: { openai: 'invalid_request_error', anthropic: 'invalid_request_error' },
  upstream_unavailable: { openai: 'api_error', anthropic: 'api_error' },
  upstream_timeout: { openai: 'api_error', anthropic: 'timeout_error' },
  upstream_error: { openai: 'api_error', anthropic: 'api_error' },
  not_ready: { openai: 'api_error', anthropic: 'overloaded_error' },
  unauthorized_admin: { openai: 'authentication_error', anthropic: 'authentication_error' },
  internal_error: { openai: 'api_error', anthropic: 'api_error' },
};

/**
 * Answers whose status the official OpenAI and Anthropic SDKs retry (409, 5xx) though the same
 * request cannot succeed: they are told not to (`x-should-retry: false`, which both obey), so a
 * client gets the error at once, not after its backoff.
 */
const FINAL: ReadonlySet<ErrorCode> = new Set(['conflict', 'not_implemented']);

/** The HTTP status of a domain error: decided here, at the edge, and nowhere else. */
export function httpStatus(err: GatewayError): number {
  return err.opts.upstreamStatus ?? STATUS[err.code];
}

export function errorBody(err: GatewayError, shape: ErrorShape): string {
  if (shape === 'anthropic') {
    return JSON.stringify({ type: 'error', error: { type: TYPES[err.code].anthropic, message: err.message } });
  }
  return JSON.stringify({
    error: { message: err.message, type: TYPES[err.code].openai, param: err.opts.param ?? null, code: err.code },
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
  if (FINAL.has(err.code)) headers['x-should-retry'] = 'false';
  res.writeHead(httpStatus(err), headers);
  res.end(body);
}
