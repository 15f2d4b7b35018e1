import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isMap, parseAllDocuments, stringify } from 'yaml';
import { KEY_PREFIX, parseResource } from '../../api/snapshot/index.js';
import { badRequest, GatewayError } from '../../kernel/errors.js';

/**
 * Standalone key management: ApiKey manifests in the config folders, edited in place so that
 * nobody edits YAML by hand to revoke a leaked key. The folder source watches these folders, so
 * a change is in service once it compiles. Only sha256 hashes are ever written.
 */
export interface KeyManifest {
  name: string;
  group: string;
  account: string;
  revoked: boolean;
  expiresAt: string | null;
  spendLimit: string | null;
  /** The file that defines it. */
  file: string;
}

export interface NewKey {
  name?: string;
  group: string;
  account: string;
  spendLimit?: string;
  expiresAt?: string;
}

/** sk-service- + 32 random bytes in base64url (43 characters). */
export function mintKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

async function yamlFiles(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir, { recursive: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return names
    .filter((f) => /\.ya?ml$/i.test(f))
    .sort()
    .map((f) => join(dir, f));
}

interface Found {
  manifest: KeyManifest;
  file: string;
  index: number;
}

async function scan(dirs: readonly string[]): Promise<Found[]> {
  const out: Found[] = [];
  const seen = new Set<string>();
  for (const dir of dirs) {
    for (const file of await yamlFiles(dir)) {
      if (seen.has(file)) continue;
      seen.add(file);
      const docs = parseAllDocuments(await readFile(file, 'utf8'));
      (Array.isArray(docs) ? docs : [docs]).forEach((doc, index) => {
        if (doc.errors.length) return;
        const o = doc.toJS() as { kind?: unknown; metadata?: { name?: unknown }; spec?: Record<string, unknown> } | null;
        if (o?.kind !== 'ApiKey' || typeof o.metadata?.name !== 'string' || !o.spec) return;
        const s = o.spec;
        out.push({
          file,
          index,
          manifest: {
            name: o.metadata.name,
            group: typeof s.group === 'string' ? s.group : '',
            account: typeof s.account === 'string' ? s.account : '',
            revoked: s.revoked === true,
            expiresAt: typeof s.expiresAt === 'string' ? s.expiresAt : null,
            spendLimit: typeof s.spendLimit === 'string' ? s.spendLimit : null,
            file,
          },
        });
      });
    }
  }
  return out;
}

/** Every ApiKey manifest below the folders, by name. */
export async function listKeyManifests(dirs: readonly string[]): Promise<KeyManifest[]> {
  return (await scan(dirs)).map((f) => f.manifest).sort((a, b) => a.name.localeCompare(b.name));
}

/** Writes through a temporary file and a rename: the watcher never reads half a manifest. */
async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, file);
}

/**
 * Mints a key and writes its manifest (hash only) as <writeDir>/<name>.yaml. The key itself is
 * returned once and kept nowhere. A name already used in any of the folders is a conflict.
 */
export async function createKeyManifest(
  dirs: readonly string[],
  writeDir: string,
  input: NewKey,
): Promise<{ key: string; manifest: KeyManifest; yaml: string }> {
  const key = mintKey();
  const hash = sha256(key);
  const name = input.name ?? `${input.account.toLowerCase().replace(/[^a-z0-9-.]/g, '-')}-${hash.slice(0, 8)}`;
  const spec = {
    group: input.group,
    account: input.account,
    keyHash: `sha256:${hash}`,
    ...(input.spendLimit ? { spendLimit: input.spendLimit } : {}),
    ...(input.expiresAt ? { expiresAt: input.expiresAt } : {}),
  };
  const object = { apiVersion: 'tollgate.dev/v1alpha1', kind: 'ApiKey', metadata: { name }, spec };
  // The schema the folder source compiles with: a key written here is one it will accept.
  const checked = parseResource({ object });
  if ('errors' in checked) {
    const e = checked.errors[0]!;
    const field = e.field.replace(/^(spec|metadata)\./, '');
    throw badRequest(`${field}: ${e.message}`, field);
  }
  if ((await scan(dirs)).some((f) => f.manifest.name === name))
    throw new GatewayError('conflict', `an ApiKey named "${name}" already exists; choose another name`, { param: 'name' });
  const yaml = stringify(object);
  await mkdir(writeDir, { recursive: true });
  const file = join(writeDir, `${name}.yaml`);
  await writeAtomic(file, yaml);
  return {
    key,
    yaml,
    manifest: {
      name,
      group: input.group,
      account: input.account,
      revoked: false,
      expiresAt: input.expiresAt ?? null,
      spendLimit: input.spendLimit ?? null,
      file,
    },
  };
}

/**
 * Sets `spec.revoked: true` on the named key's manifest, in the file that defines it, keeping
 * every other document, field and comment of that file. Revoking a revoked key changes nothing.
 */
export async function revokeKeyManifest(dirs: readonly string[], name: string): Promise<{ manifest: KeyManifest; changed: boolean }> {
  const found = (await scan(dirs)).find((f) => f.manifest.name === name);
  if (!found) throw new GatewayError('not_found', `no ApiKey named "${name.slice(0, 100)}" in the config folders`, { param: 'name' });
  if (found.manifest.revoked) return { manifest: found.manifest, changed: false };
  const text = await readFile(found.file, 'utf8');
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const doc = list[found.index]!;
  const spec = doc.get('spec');
  if (!isMap(spec)) throw new GatewayError('conflict', `the ApiKey "${name}" in ${found.file} has no spec map`);
  spec.set('revoked', true);
  await writeAtomic(found.file, list.map((d) => d.toString()).join(''));
  return { manifest: { ...found.manifest, revoked: true }, changed: true };
}
