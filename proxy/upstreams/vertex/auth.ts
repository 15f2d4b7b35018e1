import { createHash } from 'node:crypto';
import type { GoogleAuth, JWT } from 'google-auth-library';

/** google-auth-library (about 10 MB of memory) loads on the first Vertex call, not at start. */
let lib: Promise<typeof import('google-auth-library')> | undefined;
const googleAuth = () => (lib ??= import('google-auth-library'));

/**
 * Google access tokens for Vertex AI, by google-auth-library: a service account key (JSON)
 * signs a JWT that is exchanged for an access token, which the library caches and renews
 * shortly before it expires; without a key, Application Default Credentials (the environment's
 * key file, the metadata server of GKE or Cloud Run). The key's token_uri is honoured (Google's
 * own is the default), which is how the simulator serves tokens offline.
 */
const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';

export interface ServiceAccount {
  client_email: string;
  private_key: string;
  private_key_id?: string;
  project_id?: string;
  token_uri?: string;
}

export function serviceAccountOf(credential: string): ServiceAccount {
  let j: unknown;
  try {
    j = JSON.parse(credential);
  } catch {
    throw new Error('the vertex credential starts like JSON but is not valid JSON');
  }
  const o = j as Record<string, unknown>;
  if (typeof o.client_email !== 'string' || typeof o.private_key !== 'string')
    throw new Error('the vertex credential is not a service account key (client_email, private_key)');
  return o as unknown as ServiceAccount;
}

const clients = new Map<string, JWT>();
let adc: GoogleAuth | undefined;

/** A cached client per key (by its hash: the map never holds a key twice, and its name is no secret). */
function clientFor(sa: ServiceAccount, credential: string, g: typeof import('google-auth-library')): JWT {
  const id = createHash('sha256').update(credential).digest('hex');
  let c = clients.get(id);
  if (!c) {
    c = new g.JWT({ email: sa.client_email, key: sa.private_key, ...(sa.private_key_id ? { keyId: sa.private_key_id } : {}), scopes: [SCOPE] });
    const tokenUri = sa.token_uri;
    if (tokenUri && tokenUri !== GOOGLE_TOKEN_URL) {
      c.transporter.interceptors.request.add({
        resolved: (opts) => {
          if (String(opts.url) === GOOGLE_TOKEN_URL) opts.url = new URL(tokenUri);
          return Promise.resolve(opts);
        },
      });
    }
    clients.set(id, c);
  }
  return c;
}

/** An access token for the key (cached until shortly before it expires), or ADC's when there is none. */
export async function accessToken(credential: string | undefined): Promise<string> {
  let token: string | null | undefined;
  try {
    const g = await googleAuth();
    if (credential) token = (await clientFor(serviceAccountOf(credential), credential, g).getAccessToken()).token;
    else token = await (adc ??= new g.GoogleAuth({ scopes: [SCOPE] })).getAccessToken();
  } catch (err) {
    // The library's messages name the account at most, never the key; keep only the first line.
    throw new Error(`Google token exchange failed: ${String((err as Error).message).split('\n')[0]}`);
  }
  if (!token) throw new Error('Google token exchange gave no access token');
  return token;
}
