import { clientHeader } from '../headers.js';
import type { Operation, Provider } from '../types.js';
import { DEFAULT_ANTHROPIC_VERSION } from '../anthropic/index.js';

const CHAT_ONLY: ReadonlySet<Operation> = new Set<Operation>(['chat-completions']);

/**
 * OpenAI-compatible servers (vLLM, DeepSeek, Ollama, Kimi, GLM, ...): Chat Completions at
 * baseURL + backend.path (default /chat/completions), or exactly the operations `paths` names,
 * each at its path (many also offer an Anthropic-style Messages endpoint or a Responses one).
 * Bearer auth when a credential is set; on a Messages path the key also goes as x-api-key, as
 * Anthropic clients send it, with an anthropic-version, since such servers accept either.
 */
export const openaiCompatible: Provider = {
  name: 'openai-compatible',
  speaks: new Set<Operation>(['chat-completions', 'responses', 'messages', 'count-tokens']),
  operations: (backend) => (backend.paths ? new Set(Object.keys(backend.paths) as Operation[]) : CHAT_ONLY),
  path: (backend, op) => backend.paths?.[op] ?? backend.path ?? '/chat/completions',
  headers(backend, client, credential, out) {
    if (credential) out.authorization = `Bearer ${credential}`;
    if (backend.paths?.messages) {
      if (credential) out['x-api-key'] = credential;
      out['anthropic-version'] = clientHeader(client, 'anthropic-version') ?? DEFAULT_ANTHROPIC_VERSION;
    }
  },
};
