import type { Operation, Provider } from '../types.js';

/**
 * OpenAI-compatible servers (vLLM, DeepSeek, Ollama, ...): Chat Completions only, at
 * baseURL + backend.path (default /chat/completions); Bearer auth when a credential is set;
 * the backend's extra headers are added by the caller.
 */
export const openaiCompatible: Provider = {
  name: 'openai-compatible',
  speaks: new Set<Operation>(['chat-completions']),
  path: (backend) => backend.path ?? '/chat/completions',
  headers(_backend, _client, credential, out) {
    if (credential) out.authorization = `Bearer ${credential}`;
  },
};
