import { join } from 'node:path';
import type { AwsKeys } from './sigv4.js';

/**
 * AWS's default credential chain, in the order the AWS SDK walks it, fed from the environment
 * the gateway captured at start (kernel/settings.ts; nothing here reads process.env):
 *   1. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)
 *   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN (EKS IRSA), exchanged at STS
 *   3. the shared files: AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, else ~/.aws/credentials
 *      and ~/.aws/config of HOME, profile AWS_PROFILE (static keys, assume-role, SSO, process)
 *   4. the container credentials endpoint: AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI,
 *      with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE) (ECS task roles, EKS Pod Identity)
 *   5. the EC2 instance metadata service, unless AWS_EC2_METADATA_DISABLED=true
 * Each source but the first is the official provider package (@aws-sdk/credential-provider-*,
 * @smithy/credential-provider-imds) given its settings explicitly. Keys are kept until five
 * minutes before they expire, then fetched again; concurrent callers share one fetch.
 */
export type Env = (name: string) => string | undefined;

interface Identity extends AwsKeys {
  expiration?: Date;
}

/** Why no source gave keys: names the sources tried, never a value. */
export class NoAwsCredentials extends Error {
  override name = 'NoAwsCredentials';
}

const REFRESH_BEFORE_MS = 5 * 60_000;

async function resolve(env: Env, region: string): Promise<Identity> {
  const id = env('AWS_ACCESS_KEY_ID');
  const secret = env('AWS_SECRET_ACCESS_KEY');
  if (id && secret) {
    const token = env('AWS_SESSION_TOKEN');
    return { accessKeyId: id, secretAccessKey: secret, ...(token ? { sessionToken: token } : {}) };
  }
  const tried: string[] = ['environment'];
  const failures: string[] = [];
  const attempt = async (name: string, get: () => Promise<Identity>): Promise<Identity | undefined> => {
    tried.push(name);
    try {
      return await get();
    } catch (err) {
      failures.push(`${name}: ${String((err as Error).message).split('\n')[0]}`);
      return undefined;
    }
  };
  const clientConfig = { region };

  const tokenFile = env('AWS_WEB_IDENTITY_TOKEN_FILE');
  const roleArn = env('AWS_ROLE_ARN');
  if (tokenFile && roleArn) {
    const { fromTokenFile } = await import('@aws-sdk/credential-provider-web-identity');
    const sessionName = env('AWS_ROLE_SESSION_NAME');
    const got = await attempt('web identity', () =>
      fromTokenFile({ webIdentityTokenFile: tokenFile, roleArn, ...(sessionName ? { roleSessionName: sessionName } : {}), clientConfig })(),
    );
    if (got) return got;
  }

  const home = env('HOME');
  const filepath = env('AWS_SHARED_CREDENTIALS_FILE') ?? (home ? join(home, '.aws', 'credentials') : undefined);
  const configFilepath = env('AWS_CONFIG_FILE') ?? (home ? join(home, '.aws', 'config') : undefined);
  if (filepath || configFilepath) {
    const { fromIni } = await import('@aws-sdk/credential-provider-ini');
    const got = await attempt('shared config files', () =>
      fromIni({
        profile: env('AWS_PROFILE') ?? 'default',
        // A path that does not exist reads as an empty file.
        filepath: filepath ?? '/nonexistent',
        configFilepath: configFilepath ?? '/nonexistent',
        ignoreCache: true,
        clientConfig,
      })(),
    );
    if (got) return got;
  }

  const fullUri = env('AWS_CONTAINER_CREDENTIALS_FULL_URI');
  const relativeUri = env('AWS_CONTAINER_CREDENTIALS_RELATIVE_URI');
  if (fullUri || relativeUri) {
    const { fromHttp } = await import('@aws-sdk/credential-provider-http');
    const token = env('AWS_CONTAINER_AUTHORIZATION_TOKEN');
    const tokenFromFile = env('AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE');
    const got = await attempt('container credentials endpoint', () =>
      fromHttp({
        // Empty strings, not undefined, for what the environment did not give: the provider would read the process's own.
        awsContainerCredentialsRelativeUri: relativeUri ?? '',
        awsContainerCredentialsFullUri: fullUri ?? '',
        awsContainerAuthorizationToken: token ?? '',
        ...(tokenFromFile ? { awsContainerAuthorizationTokenFile: tokenFromFile } : {}),
      })(),
    );
    if (got) return got;
  }

  const imdsOff = env('AWS_EC2_METADATA_DISABLED');
  if (!imdsOff || imdsOff.toLowerCase() === 'false') {
    const { fromInstanceMetadata } = await import('@smithy/credential-provider-imds');
    const got = await attempt('instance metadata', () => fromInstanceMetadata({ timeout: 1000, maxRetries: 1 })());
    if (got) return got;
  }
  throw new NoAwsCredentials(
    `the AWS default credential chain found no credentials (tried: ${tried.join(', ')})${failures.length ? `; ${failures.join('; ')}` : ''}`,
  );
}

interface Cached {
  keys?: Identity;
  pending?: Promise<Identity>;
}
/** Per captured environment (a gateway's settings) and region: tests run several gateways in one process. */
const cache = new WeakMap<Env, Map<string, Cached>>();

const fresh = (k: Identity | undefined): k is Identity => !!k && (!k.expiration || k.expiration.getTime() - Date.now() > REFRESH_BEFORE_MS);

/** Keys from the default chain for a region (cached until shortly before they expire). */
export async function chainKeys(env: Env, region: string): Promise<AwsKeys> {
  let byRegion = cache.get(env);
  if (!byRegion) cache.set(env, (byRegion = new Map<string, Cached>()));
  let c = byRegion.get(region);
  if (!c) byRegion.set(region, (c = {}));
  if (fresh(c.keys)) return c.keys;
  const entry = c;
  entry.pending ??= resolve(env, region).finally(() => {
    entry.pending = undefined;
  });
  const keys = await entry.pending;
  entry.keys = keys;
  return { accessKeyId: keys.accessKeyId, secretAccessKey: keys.secretAccessKey, ...(keys.sessionToken ? { sessionToken: keys.sessionToken } : {}) };
}
