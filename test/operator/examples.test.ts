import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { compile } from '../../api/snapshot/index.js';
import { keyHash } from '../support/resources.js';
import { ROOT } from './harness.js';
import { manifestErrors } from './k8s-schema.js';

/** examples/cluster compiles as the operator would compile it: every resource valid, every Secret found. */
async function manifests(dir: string): Promise<Record<string, any>[]> {
  const out: Record<string, any>[] = [];
  for (const f of (await readdir(dir)).filter((x) => x.endsWith('.yaml')).sort()) {
    for (const doc of parseAllDocuments(await readFile(join(dir, f), 'utf8'))) {
      expect(doc.errors, f).toEqual([]);
      out.push(doc.toJS() as Record<string, any>);
    }
  }
  return out;
}

describe('examples/cluster', () => {
  it('compiles without errors in cluster mode, its Secrets resolving every secretRef', async () => {
    const all = [...(await manifests(join(ROOT, 'examples/cluster'))), ...(await manifests(join(ROOT, 'examples/cluster/local')))];
    const secrets = new Map(
      all.filter((o) => o.kind === 'Secret').map((o) => [`${o.metadata.namespace}/${o.metadata.name}`, o.stringData as Record<string, string>]),
    );
    const minted = new Set<string>();
    const { config, errors } = compile(
      all.filter((o) => o.apiVersion === 'tollgate.dev/v1alpha1').map((object) => ({ object })),
      {
        cluster: true,
        secret: (ns, name, key) => secrets.get(`${ns}/${name}`)?.[key],
        mintedKeyHash: (k) => (minted.add(k.metadata.name), undefined),
      },
    );
    expect(errors).toEqual([]);
    expect(Object.keys(config.models).sort()).toEqual(['claude-sonnet', 'gpt-4o-mini', 'sim-gpt']);
    // The default Group selects by label, so the local route joins it without an edit.
    expect(Object.keys(config.groups.default!.models).sort()).toEqual(['claude-sonnet', 'gpt-4o-mini', 'sim-gpt']);
    expect(config.groups['claude-code']).toMatchObject({ ccOnly: true });
    expect([...minted].sort()).toEqual(['claude-code-dev', 'team-a']);
    // The hashed key's comment names the key it was made from.
    expect(config.keys[keyHash('sk-service-example-ci-key').slice(7)]).toMatchObject({ name: 'ci', group: 'default' });
    // The built-in objects are valid for their kinds (OpenAPI schema, no unknown fields).
    expect(all.filter((o) => !o.apiVersion.startsWith('tollgate.dev/') && o.kind !== 'Namespace').flatMap(manifestErrors)).toEqual([]);
    // The optional databases (CloudNativePG, Redis) are valid too.
    const databases = await manifests(join(ROOT, 'examples/cluster/databases'));
    expect(databases.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(['Cluster/tollgate-db', 'Deployment/tollgate-redis', 'Service/tollgate-redis']);
    expect(databases.flatMap(manifestErrors)).toEqual([]);
    // Everything namespaced lives in the namespace the operator watches.
    for (const o of all.filter((x) => x.kind !== 'Namespace')) expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('tollgate');
  });
});
