/**
 * Every error a client can see, as a stable code. Domain code throws these; the front door
 * (proxy/front/render.ts) alone maps a code to an HTTP status and each protocol's error `type`.
 */
export type ErrorCode =
  | 'invalid_request'
  | 'invalid_json'
  | 'unsupported_media_type'
  | 'body_too_large'
  | 'request_timeout'
  | 'missing_api_key'
  | 'invalid_api_key'
  | 'insufficient_credits'
  | 'spend_limit_reached'
  | 'client_restricted'
  | 'forbidden'
  | 'conflict'
  | 'model_not_found'
  | 'not_found'
  | 'method_not_allowed'
  | 'upgrade_required'
  | 'rate_limited'
  | 'not_implemented'
  | 'upstream_unavailable'
  | 'upstream_timeout'
  | 'upstream_error'
  | 'not_ready'
  | 'unauthorized_admin'
  | 'internal_error';

export class GatewayError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly opts: {
      param?: string;
      retryAfterSeconds?: number;
      /** An upstream's 429 or 5xx passed on as it was (task submissions). */ upstreamStatus?: number;
    } = {},
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}

export const badRequest = (message: string, param?: string) => new GatewayError('invalid_request', message, param ? { param } : {});
