import { cp, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compile } from '../../api/snapshot/index.js';
import { FolderConfigSource, loadManifests } from '../../proxy/config/folder-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/front/features.js';
import { startGateway, type Gateway } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import { runCli } from '../support/cli.js';

/** `tollgate keys create|list|revoke` edit the ApiKey manifests of a config folder; a running gateway follows. */
let dir: string;
let data: string;
let out: string;
let gw: Gateway;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-keys-'));
  data = await mkdtemp(join(tmpdir(), 'tollgate-keys-data-'));
  out = await mkdtemp(join(tmpdir(), 'tollgate-keys-out-'));
  await cp('examples/quickstart', dir, { recursive: true });
  gw = await startGateway({
    source: new FolderConfigSource(dir, createLogger({}, 'silent'), { debounceMs: 30 }),
    port: 0,
    adminPort: 0,
    log: createLogger({}, 'silent'),
    billing: defaultBilling,
    features: defaultFeatures,
  });
});
afterAll(async () => {
  await gw?.close();
  for (const d of [dir, data, out]) if (d) await rm(d, { recursive: true, force: true });
});

const status = (key: string) => fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
async function until(fn: () => Promise<number>, want: number) {
  const end = performance.now() + 10_000;
  while ((await fn()) !== want) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${want}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('tollgate keys in standalone mode', () => {
  it('create --config writes the manifest (hash only) to DIR/keys and prints the key once; the gateway serves it', async () => {
    const r = await runCli(['keys', 'create', '--config', dir, '--group', 'default', '--account', 'demo', '--name', 'cli-key']);
    expect(r.code, r.stderr).toBe(0);
    const key = r.stdout.trim();
    expect(key).toMatch(/^sk-service-[\w-]{43}$/);
    const file = await readFile(join(dir, 'keys', 'cli-key.yaml'), 'utf8');
    expect(file).toMatch(/keyHash: sha256:[0-9a-f]{64}/);
    expect(file).not.toContain(key);
    expect(r.stderr).toContain(join(dir, 'keys', 'cli-key.yaml'));
    await until(() => status(key), 200);

    const again = await runCli(['keys', 'create', '--config', dir, '--group', 'default', '--account', 'demo', '--name', 'cli-key']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already exists');

    const list = await runCli(['keys', 'list', '--config', dir]);
    expect(list.stdout).toMatch(/cli-key\s+default\s+demo\s+active/);
    expect(list.stdout).toMatch(/quickstart-cc\s+claude-code\s+demo\s+active/);

    const revoked = await runCli(['keys', 'revoke', 'cli-key', '--config', dir]);
    expect(revoked.code, revoked.stderr).toBe(0);
    await until(() => status(key), 401);
    expect((await runCli(['keys', 'list', '--config', dir])).stdout).toMatch(/cli-key\s+default\s+demo\s+revoked/);
    expect((await runCli(['keys', 'revoke', 'cli-key', '--config', dir])).stdout).toContain('already revoked');
    const missing = await runCli(['keys', 'revoke', 'nobody', '--config', dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no ApiKey named "nobody"');
  }, 60_000);

  it('revokes a key inside a multi-document file and keeps the other documents and the comments', async () => {
    const r = await runCli(['keys', 'revoke', 'quickstart', '--config', dir]);
    expect(r.code, r.stderr).toBe(0);
    const text = await readFile(join(dir, 'keys.yaml'), 'utf8');
    expect(text).toContain('# The keys themselves are sk-service-quickstart');
    expect(text).toMatch(/name: quickstart\nspec:\n(.*\n)*?\s+revoked: true/);
    const { resources, errors } = await loadManifests(dir);
    expect(errors).toEqual([]);
    const { config, errors: compileErrors } = compile(resources);
    expect(compileErrors).toEqual([]);
    expect(Object.values(config.keys).map((k) => k.name)).toContain('quickstart-cc');
    expect(Object.values(config.keys).map((k) => k.name)).not.toContain('quickstart');
    await until(() => status('sk-service-quickstart'), 401);
    expect(await status('sk-service-quickstart-cc')).toBe(200);
  }, 60_000);

  it('--quickstart keeps new keys in the data folder, out of examples/; --out DIR writes a file', async () => {
    const before = await readdir('examples/quickstart');
    const r = await runCli(['keys', 'create', '--quickstart', '--data', data, '--group', 'default', '--account', 'demo', '--name', 'mine']);
    expect(r.code, r.stderr).toBe(0);
    expect(await readdir(join(data, 'keys'))).toEqual(['mine.yaml']);
    expect(await readdir('examples/quickstart')).toEqual(before);
    const list = await runCli(['keys', 'list', '--quickstart', '--data', data]);
    expect(list.stdout).toMatch(/mine\s+default\s+demo\s+active/);
    expect(list.stdout).toMatch(/quickstart\s+default\s+demo\s+active/);

    const o = await runCli(['keys', 'create', '--out', out, '--group', 'default', '--account', 'demo', '--name', 'outside']);
    expect(o.code, o.stderr).toBe(0);
    expect(await readFile(join(out, 'outside.yaml'), 'utf8')).toContain('name: outside');
    for (const bad of [
      ['keys', 'revoke', '--config', dir],
      ['keys', 'list'],
      ['keys', 'create', '--group', 'g', '--account', 'a', '--out', out, '--config', dir],
    ]) {
      expect((await runCli(bad)).code, bad.join(' ')).toBe(2);
    }
  }, 60_000);
});
