import { isObj } from '../../ir/json.js';
import { tokenCount } from '../../ir/usage.js';
import type { IrRequest } from '../../ir/chat.js';
import { encodeMessagesRequest } from '../anthropic/messages-codec.js';
import type { CompiledBackend, Operation, Provider } from '../types.js';
import { countBody, countOf, modelSegment } from '../gemini/index.js';
import { withoutGeminiReasoning } from '../gemini/signature.js';
import { accessToken, ambientProject, serviceAccountOf } from './auth.js';

/**
 * Vertex AI: Gemini models (publishers/google, generateContent, the Gemini codec) and Claude
 * models (publishers/anthropic, rawPredict / streamRawPredict, the Messages codec with
 * anthropic_version vertex-2023-10-16 and the model in the path), every client protocol
 * translated. baseURL is the regional endpoint (https://REGION-aiplatform.googleapis.com, or
 * https://aiplatform.googleapis.com for the global location), with the backend's `region` and
 * `project` (default: the key's project_id); or a baseURL that already names them
 * (.../v1/projects/P/locations/L). The credential is a service account key (JSON), an access
 * token, or none: Application Default Credentials from the environment captured at start
 * (vertex/auth.ts), their project too when the backend names none.
 */
const PROJECT = '{project}';
export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';

export const isClaude = (backend: CompiledBackend) => /claude/i.test(backend.model);

export function regionOf(backend: CompiledBackend): string {
  return backend.region ?? /\/\/([a-z0-9-]+)-aiplatform\.googleapis\.com/.exec(backend.baseURL)?.[1] ?? 'global';
}

/** /v1/projects/P/locations/L, unless the baseURL names them already. */
function prefixOf(backend: CompiledBackend): string {
  return /\/projects\/[^/]+\/locations\/[^/]+$/.test(backend.baseURL)
    ? ''
    : `/v1/projects/${backend.project ? encodeURIComponent(backend.project) : PROJECT}/locations/${encodeURIComponent(regionOf(backend))}`;
}

export function vertexPath(backend: CompiledBackend, stream: boolean): string {
  const prefix = prefixOf(backend);
  const method = isClaude(backend)
    ? `/publishers/anthropic/models/${encodeURIComponent(backend.model)}:${stream ? 'streamRawPredict' : 'rawPredict'}`
    : `/publishers/google/models/${modelSegment(backend.model)}${stream ? ':streamGenerateContent?alt=sse' : ':generateContent'}`;
  return prefix + method;
}

/** What count_tokens takes of a Messages request, for Claude on Vertex: the model named in the body, no output settings. */
const COUNTED = new Set(['model', 'messages', 'system', 'tools', 'tool_choice', 'thinking']);
function claudeCountBody(ir: IrRequest, model: string): Record<string, unknown> {
  const body = encodeMessagesRequest(withoutGeminiReasoning(ir), model, 1);
  return { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...Object.fromEntries(Object.entries(body).filter(([k]) => COUNTED.has(k))) };
}

export const vertex: Provider = {
  name: 'vertex',
  speaks: new Set<Operation>(),
  path: (backend) => vertexPath(backend, false),
  headers() {},
  countTokens: {
    // Gemini models count at :countTokens; Claude models at publishers/anthropic/models/count-tokens:rawPredict.
    call: (backend, ir) =>
      isClaude(backend)
        ? { path: `${prefixOf(backend)}/publishers/anthropic/models/count-tokens:rawPredict`, body: claudeCountBody(ir, backend.model) }
        : { path: vertexPath(backend, false).replace(/:generateContent$/, ':countTokens'), body: countBody(ir, backend.model) },
    count: (body) => countOf(body) ?? (isObj(body) && typeof body.input_tokens === 'number' ? tokenCount(body.input_tokens) : undefined),
  },
  async authorize(_backend, credential, call, env) {
    const key = credential?.trim().startsWith('{') ? credential : undefined;
    if (call.path.includes(PROJECT)) {
      let project: string | undefined;
      try {
        project = key ? serviceAccountOf(key).project_id : credential ? undefined : await ambientProject(env);
      } catch (err) {
        throw new Error(`the vertex backend's project could not be found: ${String((err as Error).message).split('\n')[0]}`);
      }
      if (!project) throw new Error('the vertex backend names no project: set project, or use a service account key with project_id');
      call.path = call.path.replace(PROJECT, encodeURIComponent(project));
    }
    // An Authorization the route's own headers set is used as it is.
    if (call.headers.authorization && !credential) return;
    call.headers.authorization = `Bearer ${credential && !key ? credential.trim() : await accessToken(key, env)}`;
  },
};
