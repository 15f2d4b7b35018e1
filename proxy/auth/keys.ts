import { hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { KEY_PREFIX } from '../../api/snapshot/index.js';
import type { CompiledKey } from '../../api/snapshot/index.js';
import type { RuntimeConfig, RuntimeGroup } from '../config/runtime.js';
import { GatewayError } from '../../kernel/errors.js';

/** The caller, once its key is verified. */
export interface AuthedKey {
  /** Lowercase hex sha256 of the key: the key's identity in usage rows and task ownership. */
  hash: string;
  record: CompiledKey;
  /** The ApiKey resource name: what logs and usage show. */
  name: string;
  account: string;
  group: RuntimeGroup;
  spendLimitMicro?: bigint;
}

export function hashKey(key: string): string {
  // One-shot: a Hash object per request costs several times the digest of a 60-byte key.
  return hash('sha256', key, 'hex');
}

/**
 * Bearer sk-service-... -> the key record in the config in service. The messages of the 401s
 * say what is wrong without echoing the key.
 */
export function authenticate(req: IncomingMessage, config: RuntimeConfig, now = Date.now()): AuthedKey {
  const header = req.headers.authorization;
  if (!header) {
    const hint = req.headers['x-api-key']
      ? ' (x-api-key is not read: send the key as "Authorization: Bearer", e.g. set ANTHROPIC_AUTH_TOKEN instead of ANTHROPIC_API_KEY)'
      : '';
    throw new GatewayError('missing_api_key', `missing Authorization header; send "Authorization: Bearer sk-service-..."${hint}`);
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new GatewayError('invalid_api_key', 'Authorization header must be "Bearer <key>"');
  const key = m[1]!;
  if (!key.startsWith(KEY_PREFIX)) throw new GatewayError('invalid_api_key', `invalid API key: keys start with "${KEY_PREFIX}"`);
  const digest = hashKey(key);
  const record = config.keys.get(digest);
  if (!record || (record.expiresAt !== undefined && record.expiresAt <= now)) {
    throw new GatewayError('invalid_api_key', 'invalid API key: unknown, revoked or expired');
  }
  const group = config.groups.get(record.group);
  if (!group) throw new GatewayError('invalid_api_key', 'invalid API key: its group is not in service');
  return {
    hash: digest,
    record,
    name: record.name,
    account: record.account,
    group,
    ...(record.spendLimit !== undefined ? { spendLimitMicro: BigInt(record.spendLimit) } : {}),
  };
}
