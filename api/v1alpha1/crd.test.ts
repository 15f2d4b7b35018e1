import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { checkStructural, crdFiles, generateCrds } from './crd.js';

const root = new URL('../../', import.meta.url);

type Crd = {
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: { kind: string; shortNames: string[]; categories: string[] };
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      schema: { openAPIV3Schema: Record<string, any> };
      subresources: object;
      additionalPrinterColumns: { name: string; jsonPath: string }[];
    }[];
  };
};

describe('generated CRDs', () => {
  const crds = generateCrds() as Crd[];

  it('the committed crds/ equal the generated ones', async () => {
    for (const f of crdFiles()) {
      const committed = await readFile(new URL(`crds/${f.file}`, root), 'utf8').catch(() => '(missing)');
      expect(committed, `crds/${f.file} is stale: run npm run crds`).toBe(f.yaml);
    }
  });

  it('are structural schemas', () => {
    for (const crd of crds) {
      expect(checkStructural(crd.spec.versions[0]!.schema.openAPIV3Schema), crd.metadata.name).toEqual([]);
    }
  });

  it('names, scope, versions, status subresource and printer columns', () => {
    expect(crds.map((c) => c.metadata.name)).toEqual(['modelroutes.tollgate.dev', 'groups.tollgate.dev', 'apikeys.tollgate.dev']);
    for (const crd of crds) {
      expect(crd.spec.group).toBe('tollgate.dev');
      expect(crd.spec.scope).toBe('Namespaced');
      expect(crd.spec.names.categories).toEqual(['tollgate']);
      const v = crd.spec.versions[0]!;
      expect(v).toMatchObject({ name: 'v1alpha1', served: true, storage: true, subresources: { status: {} } });
      expect(v.additionalPrinterColumns.find((c) => c.name === 'Ready')?.jsonPath).toBe('.status.conditions[?(@.type=="Ready")].status');
      expect(v.schema.openAPIV3Schema.properties.metadata).toEqual({ type: 'object' });
    }
    const cols = (i: number) => crds[i]!.spec.versions[0]!.additionalPrinterColumns.map((c) => c.name.toUpperCase());
    expect(cols(0)).toEqual(['MODEL', 'TYPE', 'READY', 'AGE']);
    expect(cols(1)).toEqual(['CCONLY', 'MULTIPLIER', 'READY', 'AGE']);
    expect(cols(2)).toEqual(['GROUP', 'ACCOUNT', 'REVOKED', 'READY', 'AGE']);
    expect(crds.map((c) => c.spec.names.shortNames)).toEqual([['mr'], ['tgg'], ['ak']]);
  });

  it('turns records into additionalProperties and the Credentials union into one object', () => {
    const spec = crds[0]!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec;
    const backend = spec.properties.backends.items;
    expect(backend.properties.headers).toEqual({ type: 'object', additionalProperties: { type: 'string' } });
    expect(backend.properties.credentials.type).toBe('object');
    expect(Object.keys(backend.properties.credentials.properties)).toEqual(['secretRef', 'env']);
    expect(backend.properties.credentials.oneOf).toEqual([{ required: ['secretRef'] }, { required: ['env'] }]);
    expect(JSON.stringify(crds)).not.toMatch(/"\$ref"|"\$defs"|"const"|"propertyNames"|"additionalProperties":false|"anyOf"/);
    expect(JSON.stringify(crds)).not.toContain('x-kubernetes-preserve-unknown-fields');
  });
});

describe('checkStructural', () => {
  it('finds every violation in a bad schema', () => {
    const bad = {
      type: 'object',
      properties: {
        metadata: { type: 'object', properties: { name: { type: 'string' } } },
        spec: {
          type: 'object',
          properties: {
            untyped: { description: 'no type' },
            ref: { $ref: '#/$defs/x' },
            both: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: { type: 'string' } },
            closed: { type: 'object', additionalProperties: false },
            list: { type: 'string', 'x-kubernetes-list-type': 'atomic' },
            union: { type: 'object', anyOf: [{ type: 'object', properties: { a: { type: 'string' } } }] },
            arr: { type: 'array' },
          },
        },
      },
    };
    const errs = checkStructural(bad);
    const expectOne = (re: RegExp) =>
      expect(
        errs.some((e) => re.test(e)),
        `${re} in ${errs.join('\n')}`,
      ).toBe(true);
    expectOne(/properties\.metadata: must be only \{type: object\}/);
    expectOne(/properties\.untyped: every node needs a type/);
    expectOne(/properties\.ref: "\$ref" is not allowed/);
    expectOne(/properties\.both: additionalProperties together with properties/);
    expectOne(/properties\.closed: additionalProperties must be a schema, not false/);
    expectOne(/properties\.list: x-kubernetes-list-type on a non-array/);
    expectOne(/union\.anyOf\[0\]: "type" must not appear inside/);
    expectOne(/properties\.arr: an array needs items/);
  });

  it('accepts a minimal good schema', () => {
    expect(
      checkStructural({ type: 'object', properties: { metadata: { type: 'object' }, m: { type: 'object', additionalProperties: { type: 'string' } } } }),
    ).toEqual([]);
  });
});
