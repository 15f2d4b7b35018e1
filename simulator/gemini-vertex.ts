import { createPublicKey, verify } from 'node:crypto';
import { anthropicMessagesRoutes } from './anthropic-messages.js';
import { countTokens, generateContent, geminiError } from './gemini-generate.js';
import type { SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';
import { simId } from './text.js';

/**
 * Vertex AI as REGION-aiplatform.googleapis.com answers it, and Google's OAuth token endpoint:
 *   POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent
 *        (and :streamGenerateContent?alt=sse, :countTokens)  Gemini's bodies (simulator/gemini-generate.ts)
 *   POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict
 *        (and :streamRawPredict)                          Messages bodies with anthropic_version
 *                                                         vertex-2023-10-16 and no model
 *   POST .../publishers/anthropic/models/count-tokens:rawPredict   count_tokens, the model in the body
 *   POST /token                                           a service account's signed JWT -> an access token
 *   GET  /computeMetadata/v1/instance/service-accounts/default/token, .../project/project-id
 *                                                         the metadata server (Metadata-Flavor: Google)
 * Every model call needs `Authorization: Bearer` with a token this simulator issued. The
 * service account is SIM_SERVICE_ACCOUNT (its key, made for the simulator, is no secret); its
 * JWT is checked (RS256 signature, issuer, scope, expiry) before a token is issued.
 */

// A key made for the simulator only: it signs nothing but requests to this simulator.
const SIM_PRIVATE_KEY = [
  '-----BEGIN PRIVATE KEY-----',
  'MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCYXnDJbQHpkZF4',
  'pthJjPi+qwik1bnkAORsn0sfuoiwt+0i4FUszqFR2tah8EsnIakZo1ByLS6czTbX',
  'TNyJ8mVuIL2tISH/R3C+X6a+2SyUmuKnkyqM0HSOqe7IxaPdV/Lm2Ovbq4WaOeZj',
  '+6pNEOzm/9QGclaAIqXVgmS6qKvWPrbtTezoiptr1Ss8kU6tloBgb5d3hCOjf/p9',
  '6vBJVoRaOPujXoyE0Nal14buGp2096C+oJ1itQNZhHv2Iik8EMvbVJl/UWHek3tP',
  'qotKmYtolV2SBtZPtjc860pyOgyQ769SEbb9gP5EAkmqZ4WGa6dYz5EazU/S5Cmc',
  '//f4filTAgMBAAECggEAAS6JYrJfMvkSLyGwiKv7vUDxiej+LOTzEV4608S4ZWdy',
  'FTGqwuI7HLO6ISiCLdtOMYdO3VpRjOzK1LHC2WAahJSOGKJz2AcnOk3SnqtTW5jy',
  's87XVNwfzr0VGxFOUNjGkZj9Ef6B+1GaveERm+ldVox5Ln8ke7TwtVZNyMwtBKPG',
  'rKND6M54TlxGbkUrVq9nQTyIvdKonrjzzMFWG+GhotptdEIOoykfN6b4cYOx+m4l',
  'ZcfgYZ3SnVE5953Yf3W7vSF3AURglsCxGpa/b/n+vFU9hsiT83q1V7oGUwZDnyQG',
  '/Lq75US0YLFt1kwkaB5XId7PWDYbW+H/DRZdykUT+QKBgQDQUEXswDe6+oWkgRq2',
  'jODbmIHWDi1f67YpPRcXRNUiwLhOgxy138c89inpnL5m9UY/fh+uuRZnkoZPXzvS',
  'K8lf0Rrg1/KYlty5V7Ls56izHzfJI8Z6yxZjzHr2LgTIDd5WyCA6eBt0dSYHlb2V',
  'ZSScP4VDJpw5RVtXADdBvMbBGQKBgQC7P6mIwtGv1PDH9y1PKactMb/XIKmg4icc',
  'EdZf1TYFDzAoD+ti/OLk7MAqKXe2nqFpDyE4izogOLOW7CfKUy5qj8C1tQDrdiV1',
  '71w/YAyImIT+YoT1+9gqkGDPlUWfOa238YH9QeI7rU93YBxgBTnALfrsJ6ugbs1Q',
  'T1m5HVAvSwKBgANIkKGXsgkvc7XRFyOzesPbVoiSNqLha0ChJuEGA7oFgaIzLNut',
  'CE3sr2JwRwwGZ7IOgd9WKYU+aQGNRbsdV5I8EIlkvf0ru5TsTfSv/he8sTtpZfJ/',
  'iv3Ntk51ETw6A7wocWGajQw74HqUIKXfL0GLOsWBMUsxzavEZBqUKCnZAoGAYoaY',
  '+jEojFCLcWyKFsFgCdPHkbbKCrF0yrxIBJz3k6nuOOZHgQp3iOVaJ9Ux/JFzdQhU',
  '/p+jshijxqH0Pe2O2ttRF0tqdHryMyADdgVgEu/N6tyEAbrGf38AsbllrOZ4lfUp',
  '5Myp8aS7z6BuzcdyH8ER6vjkwcILnlpiZ5kY/AkCgYAIsdKAlVMyNQj08ePDB43g',
  'FrMdvMPh4KIMiAs/zuNHTHZfeNDc3PQYliLT+Hb4xllBSKKh87MffUgIJex+qaC/',
  'MLuZCMqywX81jXZpKmuHeaoW7RYTBhqje6h8V/JR5gSSVC7V0u5OYKMAkJIG3AoB',
  'KZLSE54HRLDW7Xn9gf+Wvw==',
  '-----END PRIVATE KEY-----',
].join('\n');
const SIM_EMAIL = 'tollgate-sim@sim-project.iam.gserviceaccount.com';
const publicKey = createPublicKey(SIM_PRIVATE_KEY);

/** The simulator's service account key, as Google's console downloads one, with its token_uri at the simulator. */
export function simServiceAccount(simUrl: string): Record<string, string> {
  return {
    type: 'service_account',
    project_id: 'sim-project',
    private_key_id: 'sim0000000000000000000000000000000000001',
    private_key: `${SIM_PRIVATE_KEY}\n`,
    client_email: SIM_EMAIL,
    client_id: '100000000000000000001',
    token_uri: `${simUrl}/token`,
  };
}

/** Tokens issued, per simulator (an in-memory OAuth server). */
const issued = new WeakMap<object, Map<string, number>>();

function tokens(r: SimRequest): Map<string, number> {
  let t = issued.get(r.sim);
  if (!t) issued.set(r.sim, (t = new Map<string, number>()));
  return t;
}

/** Token exchanges served, for tests that show tokens are cached. */
export const tokenExchanges = new WeakMap<object, number>();

function oauthError(r: SimRequest, error: string, description: string): void {
  sendJson(r, 400, { error, error_description: description });
}

function token(r: SimRequest): void {
  const form = new URLSearchParams(r.body.toString('utf8'));
  if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return oauthError(r, 'unsupported_grant_type', 'Invalid grant_type.');
  const parts = (form.get('assertion') ?? '').split('.');
  if (parts.length !== 3) return oauthError(r, 'invalid_grant', 'Invalid JWT.');
  const [h, p, s] = parts as [string, string, string];
  let claims: Record<string, unknown>;
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as Record<string, unknown>;
    claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return oauthError(r, 'invalid_grant', 'Invalid JWT.');
  }
  if (header.alg !== 'RS256' || !verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, 'base64url'))) {
    return oauthError(r, 'invalid_grant', 'Invalid JWT Signature.');
  }
  const now = Date.now() / 1000;
  if (claims.iss !== SIM_EMAIL) return oauthError(r, 'invalid_grant', 'Invalid issuer.');
  if (typeof claims.exp !== 'number' || claims.exp < now)
    return oauthError(r, 'invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.');
  if (typeof claims.scope !== 'string' || !claims.scope.split(' ').includes('https://www.googleapis.com/auth/cloud-platform')) {
    return oauthError(r, 'invalid_scope', 'Invalid OAuth scope or ID token audience provided.');
  }
  const access = `ya29.sim-${simId('')}`;
  tokens(r).set(access, Date.now() + 3600_000);
  tokenExchanges.set(r.sim, (tokenExchanges.get(r.sim) ?? 0) + 1);
  sendJson(r, 200, { access_token: access, expires_in: 3599, token_type: 'Bearer' });
}

function authorized(r: SimRequest): boolean {
  const m = /^Bearer (\S+)$/.exec(r.req.headers.authorization ?? '');
  const until = m ? tokens(r).get(m[1]!) : undefined;
  if (until !== undefined && until > Date.now()) return true;
  geminiError(
    r,
    401,
    'UNAUTHENTICATED',
    'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.',
  );
  return false;
}

async function google(r: SimRequest): Promise<void> {
  if (!authorized(r)) return;
  const [model, method] = (r.params.model ?? '').split(':');
  if (method === 'generateContent') return generateContent(r, model!, false);
  if (method === 'streamGenerateContent' && r.query.get('alt') === 'sse') return generateContent(r, model!, true);
  if (method === 'countTokens') return countTokens(r);
  geminiError(r, 404, 'NOT_FOUND', `simulator: no method ${method ?? ''} on publishers/google/models/${model ?? ''}`);
}

const messages = (r: SimRequest) => anthropicMessagesRoutes[0]!.handler(r);
const countMessages = (r: SimRequest) => anthropicMessagesRoutes[1]!.handler(r);

async function anthropic(r: SimRequest): Promise<void> {
  if (!authorized(r)) return;
  const [model, method] = (r.params.model ?? '').split(':');
  const body = r.json;
  if (model === 'count-tokens' && method === 'rawPredict') return countClaude(r);
  if (method !== 'rawPredict' && method !== 'streamRawPredict') return geminiError(r, 404, 'NOT_FOUND', `simulator: no method ${method ?? ''}`);
  if (!body || body.anthropic_version !== 'vertex-2023-10-16') {
    return sendJson(r, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic_version: vertex-2023-10-16 is required' } });
  }
  if (body.model !== undefined)
    return sendJson(r, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'model: Extra inputs are not permitted' } });
  if ((body.stream === true) !== (method === 'streamRawPredict')) {
    return sendJson(r, 400, {
      type: 'error',
      error: { type: 'invalid_request_error', message: `stream must be ${method === 'streamRawPredict'} for ${method}` },
    });
  }
  // The Messages simulator answers it, the model taken from the path.
  body.model = model;
  r.req.headers['anthropic-version'] = '2023-06-01';
  await messages(r);
}

/**
 * publishers/anthropic/models/count-tokens:rawPredict: Anthropic's count_tokens body with the
 * model named in it (as Google documents it; anthropic_version, which the SDKs add, is accepted).
 */
async function countClaude(r: SimRequest): Promise<void> {
  const body = r.json;
  const invalid = (message: string) => sendJson(r, 400, { type: 'error', error: { type: 'invalid_request_error', message } });
  if (!body || typeof body.model !== 'string' || !/claude/.test(body.model)) return invalid('model: Field required (a Claude model on Vertex AI)');
  if (body.anthropic_version !== undefined && body.anthropic_version !== 'vertex-2023-10-16') return invalid('anthropic_version: must be vertex-2023-10-16');
  if (body.max_tokens !== undefined || body.stream !== undefined) return invalid('max_tokens, stream: Extra inputs are not permitted');
  delete body.anthropic_version;
  r.req.headers['anthropic-version'] = '2023-06-01';
  await countMessages(r);
}

/** What the metadata server answers, with the header every answer of Google's carries. */
function metadataAnswer(r: SimRequest, status: number, text: string, type = 'application/text'): void {
  r.res.writeHead(status, { 'content-type': type, 'metadata-flavor': 'Google', 'content-length': Buffer.byteLength(text) });
  r.res.end(text);
}

/** Tokens the metadata server issued, for tests that show they are cached. */
export const metadataTokens = new WeakMap<object, number>();

/**
 * The metadata server of GCE, GKE and Cloud Run (GCE_METADATA_HOST names it): its service
 * account's access token, and the project. Requests without `Metadata-Flavor: Google` are
 * refused, as Google's are.
 */
function metadataServer(r: SimRequest): void {
  if (r.req.headers['metadata-flavor'] !== 'Google') return metadataAnswer(r, 403, 'Missing required header "Metadata-Flavor": "Google"');
  if (r.path === '/computeMetadata/v1/project/project-id') return metadataAnswer(r, 200, 'sim-project');
  if (r.path === '/computeMetadata/v1/instance/service-accounts/default/token') {
    const access = `ya29.sim-metadata-${simId('')}`;
    tokens(r).set(access, Date.now() + 3600_000);
    metadataTokens.set(r.sim, (metadataTokens.get(r.sim) ?? 0) + 1);
    return metadataAnswer(r, 200, JSON.stringify({ access_token: access, expires_in: 3599, token_type: 'Bearer' }), 'application/json');
  }
  metadataAnswer(r, 404, `simulator: no metadata at ${r.path}`);
}

const BASE = '/v1/projects/:project/locations/:location/publishers';
export const geminiVertexRoutes: SimRoute[] = [
  { method: 'POST', path: `${BASE}/google/models/:model`, handler: google },
  { method: 'POST', path: `${BASE}/anthropic/models/:model`, handler: anthropic },
  { method: 'POST', path: '/token', handler: token },
  { method: 'GET', path: '/computeMetadata/v1/instance/service-accounts/default/token', handler: metadataServer },
  { method: 'GET', path: '/computeMetadata/v1/project/project-id', handler: metadataServer },
];
