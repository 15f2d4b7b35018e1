import { randomBytes } from 'node:crypto';
import { stringify } from 'yaml';
import { KEY_PREFIX } from '../../api/v1alpha1/apikey.js';
import { hashKey } from '../../proxy/auth/keys.js';
import { parseFlags, UsageError } from '../args.js';
import type { Command } from '../command.js';

/** sk-service- + 32 random bytes in base64url (43 characters). */
export function mintKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

export const command: Command = {
  summary: 'create API keys (prints the key once and its ApiKey manifest)',
  usage: `Usage: tollgate keys create --group G --account A [--name N] [--spend-limit CREDITS] [--expires-at RFC3339]

Prints a new sk-service- key once, then an ApiKey manifest that carries only its sha256 hash.
Save the key now: it cannot be recovered. Add the manifest to your config folder.`,
  run(argv) {
    const [sub, ...rest] = argv;
    if (sub !== 'create') throw new UsageError(sub ? `unknown subcommand "${sub}" (expected create)` : 'missing subcommand (expected create)');
    const { values } = parseFlags(rest, {
      group: { type: 'string' },
      account: { type: 'string' },
      name: { type: 'string' },
      'spend-limit': { type: 'string' },
      'expires-at': { type: 'string' },
    });
    if (!values.group) throw new UsageError('--group is required');
    if (!values.account) throw new UsageError('--account is required');
    if (values['spend-limit'] && !/^\d+(\.\d{1,6})?$/.test(values['spend-limit'])) throw new UsageError('--spend-limit must be a decimal number of credits');
    const key = mintKey();
    const hash = hashKey(key);
    const manifest = {
      apiVersion: 'tollgate.dev/v1alpha1',
      kind: 'ApiKey',
      metadata: { name: values.name ?? `${values.account}-${hash.slice(0, 8)}` },
      spec: {
        group: values.group,
        account: values.account,
        keyHash: `sha256:${hash}`,
        ...(values['spend-limit'] ? { spendLimit: values['spend-limit'] } : {}),
        ...(values['expires-at'] ? { expiresAt: values['expires-at'] } : {}),
      },
    };
    process.stdout.write(`# API key (shown once; store it now):\n# ${key}\n---\n${stringify(manifest)}`);
    return 0;
  },
};
