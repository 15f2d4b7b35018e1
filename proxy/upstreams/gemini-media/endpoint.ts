import { readFile } from 'node:fs/promises';
import type { CompiledBackend } from '../../../api/snapshot/index.js';
import { targetOf } from '../http.js';
import { ProviderError, type LocalMedia, type ProviderContext } from '../task-provider.js';
import { accessToken } from '../vertex/auth.js';
import { statusError, type ProviderResponse } from '../task-http.js';

/**
 * Where Google's media models live and how they authenticate, for the Gemini API and Vertex AI
 * alike (one codec, two endpoints):
 *   Gemini API  baseURL https://generativelanguage.googleapis.com (a version such as /v1beta is
 *               added when the baseURL names none); models/{model}:{method}; x-goog-api-key
 *   Vertex AI   baseURL https://{region}-aiplatform.googleapis.com/v1/projects/{project}/locations/{region};
 *               publishers/google/models/{model}:{method}; Authorization: Bearer <access token>,
 *               the credential itself or, for a service account key (JSON), one exchanged from
 *               it as Vertex chat does (vertex/auth.ts: cached until shortly before it expires)
 * Vertex is recognised by the /projects/{p}/locations/{l} path (or its host).
 */
export type Dialect = 'gemini' | 'vertex';

export function dialectOf(backend: CompiledBackend): Dialect {
  const u = new URL(backend.baseURL);
  return /\/projects\/[^/]+\/locations\/[^/]+/.test(u.pathname) || u.hostname.endsWith('aiplatform.googleapis.com') ? 'vertex' : 'gemini';
}

/** The path (after the baseURL's own) of a model method, e.g. ":generateContent". */
export function modelPath(backend: CompiledBackend, method: string): string {
  const base = targetOf(backend).basePath;
  const model = encodeURIComponent(backend.model);
  if (dialectOf(backend) === 'vertex') return `${/\/publishers\/google$/.test(base) ? '' : '/publishers/google'}/models/${model}:${method}`;
  return `${versionPrefix(backend)}/models/${model}:${method}`;
}

/** "/v1beta" unless the baseURL already ends in an API version. */
export function versionPrefix(backend: CompiledBackend): string {
  return /\/v\d+(alpha|beta)?\d*$/.test(targetOf(backend).basePath) ? '' : '/v1beta';
}

export async function authOf(ctx: Pick<ProviderContext, 'backend' | 'credential'>): Promise<Record<string, string>> {
  if (!ctx.credential) return {};
  if (dialectOf(ctx.backend) !== 'vertex') return { 'x-goog-api-key': ctx.credential };
  const c = ctx.credential.trim();
  if (!c.startsWith('{')) return { authorization: `Bearer ${c}` };
  try {
    // A key given outright: the environment's default credentials are not asked.
    return { authorization: `Bearer ${await accessToken(c, () => undefined)}` };
  } catch (err) {
    // Retried like an unreachable upstream: Google's token endpoint may be down; a bad key fails at the deadline.
    throw new ProviderError(true, 'upstream_unavailable', (err as Error).message);
  }
}

/** Google's error body: {error: {code, message, status}}. */
export function googleError(r: ProviderResponse): Error {
  const e = (r.json as { error?: { message?: string; status?: string } } | undefined)?.error;
  return statusError(r, e?.message, e?.status);
}

/** A downloaded input as base64 with its type (Google takes inputs inline). */
export async function inline(media: LocalMedia): Promise<{ mimeType: string; data: string }> {
  return { mimeType: media.contentType, data: (await readFile(media.path)).toString('base64') };
}
