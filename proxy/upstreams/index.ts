import type { ProviderName } from '../../api/snapshot/index.js';
import { anthropic } from './anthropic/index.js';
import { openaiCompatible } from './openai-compatible/index.js';
import { openai } from './openai/index.js';
import type { Provider } from './types.js';

/** Chat providers by name. Providers without chat endpoints (replicate, ...) are absent. */
const CHAT_PROVIDERS: Partial<Record<ProviderName, Provider>> = {
  openai,
  anthropic,
  'openai-compatible': openaiCompatible,
};

export function chatProvider(name: ProviderName): Provider | undefined {
  return CHAT_PROVIDERS[name];
}

export { credentialOf } from './credentials.js';
export { callUpstream, classify, closeUpstreamAgent, UpstreamError } from './http.js';
export { clientHeader, commonHeaders, responseHeaders, USER_AGENT } from './headers.js';
export { coolDown, cooldownMs, isCooling, orderBackends, resetCooldowns } from './select.js';
export type { Operation, Provider } from './types.js';
