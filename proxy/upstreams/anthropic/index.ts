import { clientHeader } from '../headers.js';
import type { Operation, Provider } from '../types.js';

export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/** Anthropic: Messages and count_tokens under baseURL + /v1 (the SDK's baseURL has no /v1). */
export const anthropic: Provider = {
  name: 'anthropic',
  speaks: new Set<Operation>(['messages', 'count-tokens']),
  path: (_backend, op) => (op === 'count-tokens' ? '/v1/messages/count_tokens' : '/v1/messages'),
  headers(_backend, client, credential, out) {
    if (credential) out['x-api-key'] = credential;
    out['anthropic-version'] = clientHeader(client, 'anthropic-version') ?? DEFAULT_ANTHROPIC_VERSION;
    const beta = clientHeader(client, 'anthropic-beta');
    if (beta) out['anthropic-beta'] = beta;
  },
};
