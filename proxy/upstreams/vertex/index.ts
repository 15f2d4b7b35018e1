import type { CompiledBackend, Operation, Provider } from '../types.js';
import { countBody, countOf, modelSegment } from '../gemini/index.js';
import { accessToken, serviceAccountOf } from './auth.js';

/**
 * Vertex AI: Gemini models (publishers/google, generateContent, the Gemini codec) and Claude
 * models (publishers/anthropic, rawPredict / streamRawPredict, the Messages codec with
 * anthropic_version vertex-2023-10-16 and the model in the path), every client protocol
 * translated. baseURL is the regional endpoint (https://REGION-aiplatform.googleapis.com, or
 * https://aiplatform.googleapis.com for the global location), with the backend's `region` and
 * `project` (default: the key's project_id); or a baseURL that already names them
 * (.../v1/projects/P/locations/L). The credential is a service account key (JSON), an access
 * token, or none (Application Default Credentials).
 */
const PROJECT = '{project}';

export const isClaude = (backend: CompiledBackend) => /claude/i.test(backend.model);

export function regionOf(backend: CompiledBackend): string {
  return backend.region ?? /\/\/([a-z0-9-]+)-aiplatform\.googleapis\.com/.exec(backend.baseURL)?.[1] ?? 'global';
}

export function vertexPath(backend: CompiledBackend, stream: boolean): string {
  const prefix = /\/projects\/[^/]+\/locations\/[^/]+$/.test(backend.baseURL)
    ? ''
    : `/v1/projects/${backend.project ? encodeURIComponent(backend.project) : PROJECT}/locations/${encodeURIComponent(regionOf(backend))}`;
  const method = isClaude(backend)
    ? `/publishers/anthropic/models/${encodeURIComponent(backend.model)}:${stream ? 'streamRawPredict' : 'rawPredict'}`
    : `/publishers/google/models/${modelSegment(backend.model)}${stream ? ':streamGenerateContent?alt=sse' : ':generateContent'}`;
  return prefix + method;
}

export const vertex: Provider = {
  name: 'vertex',
  speaks: new Set<Operation>(),
  path: (backend) => vertexPath(backend, false),
  headers() {},
  countTokens: {
    // Gemini models count at :countTokens; Claude on Vertex has no counting the gateway uses (estimated).
    call: (backend, ir) =>
      isClaude(backend) ? undefined : { path: vertexPath(backend, false).replace(/:generateContent$/, ':countTokens'), body: countBody(ir, backend.model) },
    count: countOf,
  },
  async authorize(_backend, credential, call) {
    const key = credential?.trim().startsWith('{') ? credential : undefined;
    if (call.path.includes(PROJECT)) {
      const project = key ? serviceAccountOf(key).project_id : undefined;
      if (!project) throw new Error('the vertex backend names no project: set project, or use a service account key with project_id');
      call.path = call.path.replace(PROJECT, encodeURIComponent(project));
    }
    // An Authorization the route's own headers set (the quickstart's simulator token) is used as it is.
    if (call.headers.authorization && !credential) return;
    call.headers.authorization = `Bearer ${credential && !key ? credential.trim() : await accessToken(key)}`;
  },
};
