export { chatProvider, speaks, taskProvider, type ProviderEntry } from './registry.js';

export { credentialOf } from './credentials.js';
export { OnceBody, upstreamBody, type UpstreamBody } from './body.js';
export { callUpstream, classify, createUpstreamAgent, UpstreamError } from './http.js';
export type { UpstreamResponse } from './response.js';
export { clientHeader, commonHeaders, header, responseHeaders, USER_AGENT } from './headers.js';
export { Cooldowns, cooldownMs, orderBackends } from './select.js';
export { failover, retryableFailure, type Attempt, type AttemptFailure, type FailoverResult } from './failover.js';
export type { Operation, Provider } from './types.js';
export { chatCodecFor, MIN_UPSTREAM_OUTPUT_CAP, type UpstreamChatCodec, type UpstreamStreamDecoder } from './chat-codecs.js';
