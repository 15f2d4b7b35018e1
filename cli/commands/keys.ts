import { stringify } from 'yaml';
import { createKeyManifest, listKeyManifests, mintKey, revokeKeyManifest } from '../../proxy/config/key-manifests.js';
import { hashKey } from '../../proxy/auth/keys.js';
import { GatewayError } from '../../kernel/errors.js';
import { parseFlags, UsageError } from '../args.js';
import type { Command } from '../command.js';
import { standaloneKeys } from '../key-folders.js';

const FOLDER_FLAGS = {
  config: { type: 'string' },
  quickstart: { type: 'boolean' },
  data: { type: 'string' },
} as const;

/** The manifests' folders from --config DIR or --quickstart [--data DIR], as `tollgate serve` reads them. */
function folders(values: { config?: string; quickstart?: boolean; data?: string }, required: boolean) {
  if (values.config && values.quickstart) throw new UsageError('give --config DIR or --quickstart, not both');
  if (values.data && !values.quickstart) throw new UsageError('--data goes with --quickstart (the data folder of `tollgate serve --quickstart`)');
  if (!values.config && !values.quickstart) {
    if (required) throw new UsageError('give the config folder: --config DIR (as given to tollgate serve) or --quickstart');
    return undefined;
  }
  return standaloneKeys(values.quickstart === true, values.config, values.data);
}

/** Errors of the manifests (no such key, a name taken) are the user's: one line, exit 1. */
async function userErrors<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof GatewayError) throw new Error(err.message);
    throw err;
  }
}

function create(rest: string[]): Promise<number> | number {
  const { values } = parseFlags(rest, {
    group: { type: 'string' },
    account: { type: 'string' },
    name: { type: 'string' },
    'spend-limit': { type: 'string' },
    'expires-at': { type: 'string' },
    out: { type: 'string' },
    ...FOLDER_FLAGS,
  });
  if (!values.group) throw new UsageError('--group is required');
  if (!values.account) throw new UsageError('--account is required');
  if (values['spend-limit'] && !/^\d+(\.\d{1,6})?$/.test(values['spend-limit'])) throw new UsageError('--spend-limit must be a decimal number of credits');
  const where = folders(values, false);
  if (values.out || where) {
    if (values.out && where) throw new UsageError('give --out DIR or the config folder (--config / --quickstart), not both');
    const dirs = where ?? { dirs: [values.out!], writeDir: values.out! };
    return userErrors(async () => {
      const made = await createKeyManifest(dirs.dirs, dirs.writeDir, {
        group: values.group!,
        account: values.account!,
        ...(values.name ? { name: values.name } : {}),
        ...(values['spend-limit'] ? { spendLimit: values['spend-limit'] } : {}),
        ...(values['expires-at'] ? { expiresAt: values['expires-at'] } : {}),
      });
      process.stderr.write(`wrote ApiKey "${made.manifest.name}" (its sha256 hash only) to ${made.manifest.file}\nthe key, shown once; store it now:\n`);
      process.stdout.write(`${made.key}\n`);
      return 0;
    });
  }
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
}

async function list(rest: string[]): Promise<number> {
  const { values } = parseFlags(rest, { ...FOLDER_FLAGS, json: { type: 'boolean' } });
  const where = folders(values, true)!;
  const keys = await listKeyManifests(where.dirs);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(keys, null, 2)}\n`);
    return 0;
  }
  const rows = [['NAME', 'GROUP', 'ACCOUNT', 'STATE', 'SPEND LIMIT', 'EXPIRES', 'FILE']];
  for (const k of keys) rows.push([k.name, k.group, k.account, k.revoked ? 'revoked' : 'active', k.spendLimit ?? '-', k.expiresAt ?? '-', k.file]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  process.stdout.write(rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n');
  return 0;
}

async function revoke(rest: string[]): Promise<number> {
  const { values, positionals } = parseFlags(rest, FOLDER_FLAGS, true);
  if (positionals.length !== 1) throw new UsageError('give the name of one ApiKey: tollgate keys revoke NAME --config DIR');
  const where = folders(values, true)!;
  const { manifest, changed } = await userErrors(() => revokeKeyManifest(where.dirs, positionals[0]!));
  process.stdout.write(
    changed
      ? `revoked ApiKey "${manifest.name}" in ${manifest.file}; a running gateway watching the folder refuses it (401) once it reloads\n`
      : `ApiKey "${manifest.name}" in ${manifest.file} was already revoked\n`,
  );
  return 0;
}

export const command: Command = {
  summary: 'create, list and revoke API keys (standalone: the ApiKey manifests of the config folder)',
  usage: `Usage: tollgate keys create --group G --account A [--name N] [--spend-limit CREDITS] [--expires-at RFC3339]
                       [--out DIR | --config DIR | --quickstart [--data DIR]]
       tollgate keys list   (--config DIR | --quickstart [--data DIR]) [--json]
       tollgate keys revoke NAME (--config DIR | --quickstart [--data DIR])

create mints a sk-service- key. With a folder it writes the ApiKey manifest (its sha256 hash only)
there as NAME.yaml and prints the key alone on stdout, once: --out DIR writes into DIR, --config DIR
into DIR/keys, --quickstart into the quickstart's data folder (.tollgate/keys, or DIR/keys with
--data DIR), which \`tollgate serve\` watches. Without a folder it prints the key and the manifest.
list shows every ApiKey manifest of the folders the gateway reads. revoke sets spec.revoked: true in
the file that defines NAME, keeping the rest of the file; a running gateway picks the change up.`,
  run(argv) {
    const [sub, ...rest] = argv;
    if (sub === 'create') return create(rest);
    if (sub === 'list') return list(rest);
    if (sub === 'revoke') return revoke(rest);
    throw new UsageError(sub ? `unknown subcommand "${sub}" (expected create, list or revoke)` : 'missing subcommand (expected create, list or revoke)');
  },
};
