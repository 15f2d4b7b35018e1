import { describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group, keyHash } from '../support/resources.js';
import { compile } from '../../api/snapshot/compile.js';
import { fromMicro, toMicro } from '../../api/snapshot/money.js';

const raw = (...objects: unknown[]) => objects.map((object, i) => ({ object, source: `f.yaml#${i + 1}` }));

describe('compile', () => {
  it('builds keys, groups with effective prices, and models', () => {
    const { config, errors } = compile(
      raw(
        chatRoute('m1', 'http://u/v1', { pricing: { inputPerMillion: '0.50', outputPerMillion: '1.50' } }),
        group('g', ['m1'], { priceMultiplier: '1.5', priceOverrides: { m1: { outputPerMillion: '1' } } }),
        apiKey('k', 'sk-service-x', 'g', { spendLimit: '2.5' }),
      ),
    );
    expect(errors).toEqual([]);
    expect(config.groups.g!.models.m1).toEqual({ inputPerMillion: '750000', outputPerMillion: '1000000' });
    const hex = keyHash('sk-service-x').slice(7);
    expect(config.keys[hex]).toEqual({ name: 'k', group: 'g', account: 'acct', spendLimit: '2500000' });
    expect(config.models.m1!.backends[0]).toMatchObject({ provider: 'openai', baseURL: 'http://u/v1', model: 'm1', weight: 1, priority: 0 });
  });

  it('names resource and field for each error and still compiles the valid rest', () => {
    const { config, errors } = compile(
      raw(
        chatRoute('m1', 'http://u/v1'),
        chatRoute('m1-dup', 'http://u/v1', { model: 'm1' }),
        group('bad', ['m1', 'nope']),
        group('good', ['m1']),
        { ...group('typo', ['m1']), spec: { models: ['m1'], priceMultiplyer: '2' } },
        apiKey('orphan', 'sk-service-o', 'missing'),
        { ...apiKey('nohash', 'sk-service-n', 'good'), spec: { group: 'good', account: 'a' } },
        chatRoute('money', 'http://u/v1', { pricing: { inputPerMillion: '0.1234567' } }),
        apiKey('ok', 'sk-service-ok', 'good'),
      ),
    );
    const msgs = errors.map((e) => `${e.kind}/${e.name} ${e.field}: ${e.message}`);
    expect(msgs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^ModelRoute\/m1-dup spec.model: model code "m1" is already defined/),
        'Group/bad spec.models[1]: no valid ModelRoute defines model "nope"',
        'Group/typo spec: unknown field "priceMultiplyer"',
        'ApiKey/orphan spec.group: group "missing" does not exist or is invalid',
        expect.stringMatching(/^ApiKey\/nohash spec.keyHash: keyHash is required outside a cluster/),
        expect.stringMatching(/^ModelRoute\/money spec.pricing.inputPerMillion: must be a decimal/),
      ]),
    );
    expect(errors).toHaveLength(6);
    expect(errors.find((e) => e.name === 'typo')?.source).toBe('f.yaml#5');
    expect(Object.keys(config.groups)).toEqual(['good']);
    expect(Object.values(config.keys).map((k) => k.name)).toEqual(['ok']);
  });

  it('drops revoked and expired keys; the version is a content hash', () => {
    const base = [chatRoute('m', 'http://u/v1'), group('g', ['m'])];
    const a = compile(raw(...base, apiKey('k', 'sk-service-a', 'g')));
    const b = compile(raw(apiKey('k', 'sk-service-a', 'g'), ...base));
    expect(a.config.version).toBe(b.config.version);
    const revoked = compile(raw(...base, apiKey('k', 'sk-service-a', 'g', { revoked: true })));
    expect(revoked.config.keys).toEqual({});
    expect(revoked.config.version).not.toBe(a.config.version);
    const expired = compile(raw(...base, apiKey('k', 'sk-service-a', 'g', { expiresAt: '2020-01-01T00:00:00Z' })));
    expect(expired.config.keys).toEqual({});
  });

  it('selects models by label and rejects overrides for models outside the group', () => {
    const labelled = { ...chatRoute('m', 'http://u/v1'), metadata: { name: 'm', labels: { tier: 'cheap' } } };
    const { config, errors } = compile(
      raw(
        labelled,
        chatRoute('x', 'http://u/v1'),
        group('g', [], { modelSelector: { matchLabels: { tier: 'cheap' } } }),
        group('h', ['m'], { priceOverrides: { x: { inputPerMillion: '1' } } }),
      ),
    );
    expect(Object.keys(config.groups.g!.models)).toEqual(['m']);
    expect(errors.map((e) => `${e.name} ${e.field}`)).toEqual(['h spec.priceOverrides.x']);
  });
});

describe('money', () => {
  it('converts decimals exactly', () => {
    expect(toMicro('10.5')).toBe(10_500_000n);
    expect(toMicro('0.000001')).toBe(1n);
    expect(fromMicro(10_500_000n)).toBe('10.500000');
    expect(fromMicro(-1n)).toBe('-0.000001');
    expect(() => toMicro('1e3')).toThrow();
  });
});
