import { DEFAULT_ANTHROPIC_VERSION } from '../anthropic/index.js';
import { clientHeader } from '../headers.js';
import type { CompiledBackend, Operation, Provider } from '../types.js';

/**
 * OpenAI-compatible servers (vLLM, DeepSeek, Ollama, Kimi, GLM, ...): Chat Completions at
 * baseURL + backend.path (default /chat/completions); Bearer auth when a credential is set;
 * the backend's extra headers are added by the caller. DeepSeek-style `reasoning_content`
 * (and `reasoning`) in answers and streams become reasoning parts (openai/chat-codec.ts).
 */
export const openaiCompatible: Provider = {
  name: 'openai-compatible',
  speaks: new Set<Operation>(['chat-completions']),
  path: (backend) => backend.path ?? '/chat/completions',
  headers(_backend, _client, credential, out) {
    if (credential) out.authorization = `Bearer ${credential}`;
  },
};

const derived = new WeakMap<CompiledBackend, Provider>();

/**
 * A backend with `paths` speaks exactly the APIs it names (chatCompletions, responses, messages,
 * countTokens), each passed through when the client speaks it; the others are translated to one
 * of them. Its Messages endpoint gets the key as x-api-key too, and an anthropic-version;
 * Anthropic's beta flags are not sent (servers that are not Anthropic refuse ones they do not know).
 */
export function openaiCompatibleFor(backend: CompiledBackend): Provider {
  const byOp = backend.paths;
  if (!byOp) return openaiCompatible;
  let p = derived.get(backend);
  if (p) return p;
  const speaksMessages = byOp.messages !== undefined;
  p = {
    name: 'openai-compatible',
    speaks: new Set(Object.keys(byOp) as Operation[]),
    path: (_b, op) => byOp[op] ?? byOp['chat-completions'] ?? '/chat/completions',
    headers(_b, client, credential, out) {
      if (credential) out.authorization = `Bearer ${credential}`;
      if (!speaksMessages) return;
      if (credential) out['x-api-key'] = credential;
      out['anthropic-version'] = clientHeader(client, 'anthropic-version') ?? DEFAULT_ANTHROPIC_VERSION;
    },
  };
  derived.set(backend, p);
  return p;
}
