/** Error types by status, in each client protocol's shape: an upstream's own type names another protocol's vocabulary. */
export function errorTypeFor(status: number, anthropic: boolean): string {
  if (status === 400 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 402) return anthropic ? 'billing_error' : 'insufficient_quota';
  if (status === 403) return 'permission_error';
  if (status === 404) return anthropic ? 'not_found_error' : 'invalid_request_error';
  if (status === 413) return anthropic ? 'request_too_large' : 'invalid_request_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return anthropic ? 'overloaded_error' : 'api_error';
  return 'api_error';
}
