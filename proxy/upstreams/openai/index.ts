import { clientHeader } from '../headers.js';
import type { Operation, Provider } from '../types.js';

/** OpenAI: Chat Completions and Responses under baseURL (which includes /v1); Bearer auth. */
export const openai: Provider = {
  name: 'openai',
  speaks: new Set<Operation>(['chat-completions', 'responses']),
  path: (_backend, op) => (op === 'responses' ? '/responses' : '/chat/completions'),
  headers(_backend, client, credential, out) {
    if (credential) out.authorization = `Bearer ${credential}`;
    const beta = clientHeader(client, 'openai-beta');
    if (beta) out['openai-beta'] = beta;
  },
};
