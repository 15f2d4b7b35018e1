import type { CompiledBackend, Operation, Provider } from '../types.js';
import { chainKeys } from './chain.js';
import { signedHeaders, type AwsKeys } from './sigv4.js';

/**
 * Amazon Bedrock's Converse API (any chat model Bedrock hosts), every client protocol translated
 * to it. baseURL is the runtime endpoint (https://bedrock-runtime.REGION.amazonaws.com); the
 * region is the backend's `region`, else read from that host. The credential is one of:
 *   ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]      requests signed with SigV4
 *   {"accessKeyId": ..., "secretAccessKey": ..., "sessionToken": ...}   the same, as JSON
 *   a Bedrock API key                                    sent as Authorization: Bearer
 * and with none, AWS's default chain (bedrock/chain.ts: the environment captured at start, web
 * identity, the shared config files, the container endpoint, the instance role) gives the keys.
 */
type AwsAuth = { kind: 'keys'; keys: AwsKeys } | { kind: 'bearer'; token: string } | { kind: 'chain' };

export function awsAuthOf(credential: string | undefined): AwsAuth {
  if (!credential) return { kind: 'chain' };
  const c = credential.trim();
  if (c.startsWith('{')) {
    let j: unknown;
    try {
      j = JSON.parse(c);
    } catch {
      throw new Error('the bedrock credential starts like JSON but is not valid JSON');
    }
    const o = j as Record<string, unknown>;
    if (typeof o.accessKeyId !== 'string' || typeof o.secretAccessKey !== 'string')
      throw new Error('the bedrock credential JSON needs accessKeyId and secretAccessKey');
    return {
      kind: 'keys',
      keys: { accessKeyId: o.accessKeyId, secretAccessKey: o.secretAccessKey, ...(typeof o.sessionToken === 'string' ? { sessionToken: o.sessionToken } : {}) },
    };
  }
  const parts = c.split(':');
  if (parts.length === 2 || parts.length === 3) {
    const [accessKeyId, secretAccessKey, sessionToken] = parts as [string, string, string | undefined];
    return { kind: 'keys', keys: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } };
  }
  return { kind: 'bearer', token: c };
}

export function regionOf(backend: CompiledBackend): string {
  return backend.region ?? /bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com/.exec(backend.baseURL)?.[1] ?? 'us-east-1';
}

export const conversePath = (backend: CompiledBackend, stream: boolean) =>
  `/model/${encodeURIComponent(backend.model)}/${stream ? 'converse-stream' : 'converse'}`;

export const bedrock: Provider = {
  name: 'bedrock',
  speaks: new Set<Operation>(),
  path: (backend) => conversePath(backend, false),
  headers(_backend, _client, credential, out) {
    const auth = credential && !credential.includes(':') && !credential.trim().startsWith('{') ? credential.trim() : undefined;
    if (auth) out.authorization = `Bearer ${auth}`;
  },
  async authorize(backend, credential, call, env) {
    // ConverseStream answers in AWS's event stream, not SSE; the accept header is signed with the rest.
    call.headers.accept = call.path.endsWith('/converse-stream') ? 'application/vnd.amazon.eventstream' : 'application/json';
    const auth = awsAuthOf(credential);
    // A Bedrock API key, or an Authorization the route's own headers set, is used as it is.
    if (auth.kind === 'bearer' || (auth.kind === 'chain' && call.headers.authorization)) return;
    const region = regionOf(backend);
    const keys = auth.kind === 'keys' ? auth.keys : await chainKeys(env, region);
    Object.assign(call.headers, await signedHeaders(new URL(backend.baseURL + call.path), call.headers, call.body, { region, service: 'bedrock', keys }));
  },
};
