import { createHash } from 'node:crypto';

/** Small builders for manifests in tests (the YAML a user would write, as objects). */
export const API = 'tollgate.dev/v1alpha1';

export function keyHash(key: string): string {
  return `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

export function chatRoute(name: string, baseURL: string, extra: Record<string, unknown> = {}) {
  const { backend, ...spec } = extra as { backend?: Record<string, unknown> };
  return {
    apiVersion: API,
    kind: 'ModelRoute',
    metadata: { name },
    spec: {
      type: 'chat',
      backends: [{ provider: 'openai', baseURL, ...backend }],
      pricing: { inputPerMillion: '1', outputPerMillion: '2' },
      ...spec,
    },
  };
}

export function group(name: string, models: string[], spec: Record<string, unknown> = {}) {
  return { apiVersion: API, kind: 'Group', metadata: { name }, spec: { models, ...spec } };
}

export function apiKey(name: string, key: string, groupName: string, spec: Record<string, unknown> = {}) {
  return { apiVersion: API, kind: 'ApiKey', metadata: { name }, spec: { group: groupName, account: 'acct', keyHash: keyHash(key), ...spec } };
}
