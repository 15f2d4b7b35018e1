import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../kernel/log.js';
import { FolderConfigSource, loadManifests } from './folder-source.js';

const MODEL = `apiVersion: tollgate.dev/v1alpha1
kind: ModelRoute
metadata: {name: m}
spec:
  type: chat
  backends: [{provider: openai, baseURL: "http://127.0.0.1:1/v1"}]
  pricing: {inputPerMillion: "PRICE"}
`;
const GROUP = `apiVersion: tollgate.dev/v1alpha1
kind: Group
metadata: {name: g}
spec: {models: [m]}
`;

let dir: string;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function waitFor(pred: () => boolean, ms = 3000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('folder config source', () => {
  it('loads multi-document YAML from nested folders and names parse errors by file and document', async () => {
    dir = await mkdtemp(join(tmpdir(), 'tg-cfg-'));
    await writeFile(join(dir, 'a.yaml'), `${MODEL.replace('PRICE', '1')}---\n${GROUP}`);
    await writeFile(join(dir, 'b.yml'), 'kind: [unclosed');
    await writeFile(join(dir, 'ignored.txt'), 'not yaml');
    const { resources, errors } = await loadManifests(dir);
    expect(resources.map((r) => (r.object as { kind: string }).kind)).toEqual(['ModelRoute', 'Group']);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.source).toMatch(/b\.yml#1$/);
  });

  it('swaps on a valid change and keeps the last good config on an invalid one', async () => {
    dir = await mkdtemp(join(tmpdir(), 'tg-cfg-'));
    await writeFile(join(dir, 'm.yaml'), MODEL.replace('PRICE', '1'));
    await writeFile(join(dir, 'g.yaml'), GROUP);
    const source = new FolderConfigSource(dir, createLogger({}, 'silent'), { debounceMs: 20 });
    const seen: string[] = [];
    source.onUpdate((c) => seen.push(c.groups.g!.models.m!.inputPerMillion!));
    await source.start();
    try {
      expect(source.current()!.groups.g!.models.m!.inputPerMillion).toBe('1000000');
      await writeFile(join(dir, 'm.yaml'), MODEL.replace('PRICE', '2'));
      await waitFor(() => seen.includes('2000000'));
      await writeFile(join(dir, 'm.yaml'), MODEL.replace('PRICE', 'two'));
      await waitFor(() => source.lastErrors.length > 0);
      expect(source.lastErrors[0]!.field).toBe('spec.pricing.inputPerMillion');
      expect(source.current()!.groups.g!.models.m!.inputPerMillion).toBe('2000000');
    } finally {
      await source.stop();
    }
  });

  it('refuses a change that empties the config (no models where there were some), and counts the refusal; a start on an empty folder serves empty', async () => {
    dir = await mkdtemp(join(tmpdir(), 'tg-cfg-'));
    await writeFile(join(dir, 'm.yaml'), MODEL.replace('PRICE', '1'));
    await writeFile(join(dir, 'g.yaml'), GROUP);
    const source = new FolderConfigSource(dir, createLogger({}, 'silent'), { debounceMs: 20 });
    const refused: string[] = [];
    source.onReject((why) => refused.push(why));
    await source.start();
    try {
      const version = source.current()!.version;
      await rm(join(dir, 'm.yaml'));
      await rm(join(dir, 'g.yaml'));
      await waitFor(() => refused.length > 0);
      expect(refused[0]).toMatch(/no models where the config in service has 1/);
      expect(source.current()!.version).toBe(version);
    } finally {
      await source.stop();
    }
    const empty = new FolderConfigSource(dir, createLogger({}, 'silent'), { watch: false });
    await empty.start();
    expect(Object.keys(empty.current()!.models)).toEqual([]);
  });
});
