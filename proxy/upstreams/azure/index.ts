import type { CompiledBackend, Operation, Provider } from '../types.js';

/**
 * Azure OpenAI: the OpenAI wire at Azure's paths, passed through like `openai` for Chat
 * Completions and Responses clients. baseURL is the resource endpoint as the SDK's AzureOpenAI
 * takes it (https://NAME.openai.azure.com, or .../openai): deployments at
 * /openai/deployments/{deployment}/chat/completions?api-version=..., Responses at
 * /openai/responses?api-version=...; a baseURL ending in /openai/v1 is Azure's v1 API (OpenAI's
 * own paths, no api-version). The backend's model is the deployment name. The credential is an
 * API key (the api-key header), or a Microsoft Entra ID access token (a JWT) sent as Bearer.
 */
export const DEFAULT_API_VERSION = '2024-10-21';
/** Responses came to Azure in preview versions only. */
export const DEFAULT_RESPONSES_API_VERSION = '2025-04-01-preview';

export function azurePath(backend: CompiledBackend, op: Operation): string {
  const base = backend.baseURL;
  if (/\/openai\/v1$/.test(base)) return op === 'responses' ? '/responses' : '/chat/completions';
  const prefix = /\/openai$/.test(base) ? '' : '/openai';
  const version = encodeURIComponent(backend.apiVersion ?? (op === 'responses' ? DEFAULT_RESPONSES_API_VERSION : DEFAULT_API_VERSION));
  if (op === 'responses') return `${prefix}/responses?api-version=${version}`;
  return `${prefix}/deployments/${encodeURIComponent(backend.model)}/chat/completions?api-version=${version}`;
}

/** An Entra ID token is a JWT (three base64url parts, the first a JSON header); an Azure key is not. */
const isJwt = (s: string) => /^eyJ[\w-]*\.[\w-]+\.[\w-]*$/.test(s);

export const azureOpenai: Provider = {
  name: 'azure-openai',
  speaks: new Set<Operation>(['chat-completions', 'responses']),
  path: azurePath,
  headers(_backend, _client, credential, out) {
    if (!credential) return;
    if (isJwt(credential)) out.authorization = `Bearer ${credential}`;
    else out['api-key'] = credential;
  },
};
