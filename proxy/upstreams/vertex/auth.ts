import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { GoogleAuth, JWT } from 'google-auth-library';
import { request } from 'undici';

/**
 * Google access tokens for Vertex AI, by google-auth-library: a service account key (JSON)
 * signs a JWT that is exchanged for an access token, which the library caches and renews
 * shortly before it expires. The key's token_uri is honoured (Google's own is the default),
 * which is how the simulator serves tokens offline.
 *
 * Without a key, Application Default Credentials, in Google's order, from the environment the
 * gateway captured at start (nothing here reads process.env):
 *   1. the file GOOGLE_APPLICATION_CREDENTIALS names
 *   2. gcloud's application_default_credentials.json (CLOUDSDK_CONFIG, else ~/.config/gcloud of HOME)
 *   3. the metadata server of GCE, GKE and Cloud Run (GCE_METADATA_HOST or GCE_METADATA_IP, else
 *      169.254.169.254): its service account's token, cached until a minute before it expires
 * A file holding a service account key is used as a key above; any other kind (a user's
 * refresh token, workload identity federation) goes to google-auth-library as that file.
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

/** google-auth-library (about 10 MB of memory) loads on the first Vertex call, not at start. */
let lib: Promise<typeof import('google-auth-library')> | undefined;
const googleAuth = () => (lib ??= import('google-auth-library'));

const clients = new Map<string, JWT>();

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

export type Env = (name: string) => string | undefined;

/** Where Application Default Credentials come from in an environment. */
type Ambient =
  { kind: 'key'; credential: string; sa: ServiceAccount } | { kind: 'file'; auth: GoogleAuth; project?: string } | { kind: 'metadata'; host: string };

const ambients = new WeakMap<Env, Promise<Ambient>>();

async function ambientOf(env: Env): Promise<Ambient> {
  const home = env('HOME');
  const gcloud = env('CLOUDSDK_CONFIG') ?? (home ? join(home, '.config', 'gcloud') : undefined);
  const named = env('GOOGLE_APPLICATION_CREDENTIALS');
  for (const file of [named, gcloud && join(gcloud, 'application_default_credentials.json')]) {
    if (!file) continue;
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      // A file named outright must be there; gcloud's may not be.
      if (file === named)
        throw new Error(`GOOGLE_APPLICATION_CREDENTIALS names a file that cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      continue;
    }
    let j: Record<string, unknown>;
    try {
      j = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new Error('the application default credentials file is not valid JSON');
    }
    if (j.type === 'service_account') return { kind: 'key', credential: text, sa: serviceAccountOf(text) };
    const project = typeof j.quota_project_id === 'string' ? j.quota_project_id : undefined;
    return { kind: 'file', auth: new (await googleAuth()).GoogleAuth({ keyFilename: file, scopes: [SCOPE] }), ...(project ? { project } : {}) };
  }
  return { kind: 'metadata', host: env('GCE_METADATA_HOST') ?? env('GCE_METADATA_IP') ?? '169.254.169.254' };
}

function ambient(env: Env): Promise<Ambient> {
  let a = ambients.get(env);
  if (!a) {
    a = ambientOf(env);
    // A failure is not kept: the file may appear (a mounted Secret) before the next call.
    a.catch(() => ambients.delete(env));
    ambients.set(env, a);
  }
  return a;
}

/** The metadata server, GET only, as Google's client libraries ask it. */
async function metadata(host: string, path: string): Promise<string> {
  const base = /^https?:\/\//.test(host) ? host : `http://${host}`;
  const r = await request(`${base}/computeMetadata/v1/${path}`, { headers: { 'metadata-flavor': 'Google' }, signal: AbortSignal.timeout(3000) });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`the metadata server answered ${r.statusCode} for ${path}`);
  if (r.headers['metadata-flavor'] !== 'Google') throw new Error('the metadata server did not answer as Google’s (no Metadata-Flavor: Google)');
  return text;
}

/** `until` on the monotonic clock: expires_in is relative, and a wall clock stepped back must not keep an expired token in use. */
const metadataTokens = new Map<string, { token: string; until: number; pending?: Promise<string> }>();

/** The metadata server's token for its default service account, cached until a minute before it expires. */
async function metadataToken(host: string): Promise<string> {
  let c = metadataTokens.get(host);
  if (c && c.until - performance.now() > 60_000) return c.token;
  if (!c) metadataTokens.set(host, (c = { token: '', until: 0 }));
  const entry = c;
  entry.pending ??= (async () => {
    const t = JSON.parse(await metadata(host, `instance/service-accounts/default/token?scopes=${encodeURIComponent(SCOPE)}`)) as Record<string, unknown>;
    if (typeof t.access_token !== 'string' || typeof t.expires_in !== 'number') throw new Error('the metadata server gave no access token');
    entry.token = t.access_token;
    entry.until = performance.now() + t.expires_in * 1000;
    return entry.token;
  })().finally(() => {
    entry.pending = undefined;
  });
  return entry.pending;
}

/** An access token for the key (cached until shortly before it expires), or Application Default Credentials' without one. */
export async function accessToken(credential: string | undefined, env: Env): Promise<string> {
  let token: string | null | undefined;
  try {
    if (credential) token = (await clientFor(serviceAccountOf(credential), credential, await googleAuth()).getAccessToken()).token;
    else {
      const a = await ambient(env);
      if (a.kind === 'key') token = (await clientFor(a.sa, a.credential, await googleAuth()).getAccessToken()).token;
      else if (a.kind === 'file') token = await a.auth.getAccessToken();
      else token = await metadataToken(a.host);
    }
  } catch (err) {
    // The library's messages name the account at most, never the key; keep only the first line.
    throw new Error(`Google token exchange failed: ${String((err as Error).message).split('\n')[0]}`);
  }
  if (!token) throw new Error('Google token exchange gave no access token');
  return token;
}

/**
 * The project of Application Default Credentials: the key file's project_id, GOOGLE_CLOUD_PROJECT
 * (or GCLOUD_PROJECT), the gcloud file's quota project, or the metadata server's project.
 */
export async function ambientProject(env: Env): Promise<string | undefined> {
  const a = await ambient(env);
  if (a.kind === 'key' && a.sa.project_id) return a.sa.project_id;
  const named = env('GOOGLE_CLOUD_PROJECT') ?? env('GCLOUD_PROJECT');
  if (named) return named;
  if (a.kind === 'file') return a.project;
  if (a.kind === 'metadata') return (await metadata(a.host, 'project/project-id')).trim() || undefined;
  return undefined;
}
