import { isObj } from '../../ir/json.js';
import { tokenCount } from '../../ir/usage.js';
import type { CompiledBackend, Operation, Provider } from '../types.js';
import { encodeGeminiRequest } from './request.js';

/**
 * Google AI Studio (the Generative Language API): baseURL as @google/genai takes it
 * (https://generativelanguage.googleapis.com, the API version added as v1beta unless the
 * baseURL ends with one), key in x-goog-api-key. No client protocol is Gemini's: every call is
 * translated (proxy/upstreams/gemini/request.ts, response.ts).
 */
export const gemini: Provider = {
  name: 'gemini',
  speaks: new Set<Operation>(),
  path: (backend) => geminiPath(backend, false),
  headers(_backend, _client, credential, out) {
    if (credential) out['x-goog-api-key'] = credential;
  },
  countTokens: {
    // The whole request (system instruction and tools included) counts only inside generateContentRequest.
    call: (backend, ir) => ({
      path: geminiPath(backend, false).replace(/:generateContent$/, ':countTokens'),
      body: { generateContentRequest: { model: `models/${backend.model.replace(/^models\//, '')}`, ...countBody(ir, backend.model) } },
    }),
    count: countOf,
  },
};

/** What countTokens counts: the request without its generationConfig (the cap counts nothing). */
export function countBody(ir: Parameters<typeof encodeGeminiRequest>[0], model: string): Record<string, unknown> {
  const { generationConfig: _cap, ...body } = encodeGeminiRequest(ir, model, 1);
  return body;
}

export function countOf(body: unknown): number | undefined {
  return isObj(body) && typeof body.totalTokens === 'number' ? tokenCount(body.totalTokens) : undefined;
}

/** The model's method path: generateContent, or streamGenerateContent as SSE. */
export function geminiPath(backend: CompiledBackend, stream: boolean): string {
  const version = /\/v1(beta|alpha)?\d*$/.test(backend.baseURL) ? '' : '/v1beta';
  return `${version}/models/${modelSegment(backend.model)}${methodOf(stream)}`;
}

export const methodOf = (stream: boolean) => (stream ? ':streamGenerateContent?alt=sse' : ':generateContent');

/** `models/gemini-2.5-flash` and `gemini-2.5-flash` name the same model. */
export const modelSegment = (model: string) => encodeURIComponent(model.replace(/^models\//, ''));
