import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runCli } from './support/cli.js';

describe('tollgate CLI', () => {
  it('keys create prints a key once and a manifest holding only its hash', async () => {
    const r = await runCli(['keys', 'create', '--group', 'default', '--account', 'demo', '--name', 'alice']);
    expect(r.code).toBe(0);
    const key = /# (sk-service-[A-Za-z0-9_-]{43})\n/.exec(r.stdout)?.[1];
    expect(key).toBeDefined();
    const manifest = parse(r.stdout.split('---\n')[1]!) as { kind: string; metadata: { name: string }; spec: Record<string, string> };
    expect(manifest.kind).toBe('ApiKey');
    expect(manifest.metadata.name).toBe('alice');
    expect(manifest.spec.keyHash).toBe(`sha256:${createHash('sha256').update(key!).digest('hex')}`);
    expect(r.stdout.split('---\n')[1]).not.toContain(key);
  });

  it('bad flags and unknown commands print one line and exit 2', async () => {
    const cases = [['keys', 'create', '--group', 'g'], ['keys', 'create', '--bogus'], ['serve', '--port', 'eighty'], ['serve'], ['nope']];
    for (const args of cases) {
      const r = await runCli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
  });

  it('every command has --help', async () => {
    for (const c of ['serve', 'simulate', 'keys', 'crds']) {
      const r = await runCli([c, '--help']);
      expect(r.code, c).toBe(0);
      expect(r.stdout, c).toMatch(/Usage: tollgate /);
    }
  });
});
