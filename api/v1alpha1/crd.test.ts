import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { checkStructural, crdFiles, generateCrds } from './crd.js';
import { GroupSpec } from './group.js';
import { ModelRouteSpec } from './modelroute.js';

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
      additionalPrinterColumns: { name: string; jsonPath: string; priority?: number }[];
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

  it('describe every field of spec and status, for kubectl explain', () => {
    const missing: string[] = [];
    // A list's items are explained by the list's own description; their fields each by theirs.
    const walk = (node: Record<string, any>, path: string, item = false) => {
      if (!item && (typeof node.description !== 'string' || node.description.trim() === '')) missing.push(path);
      for (const [k, v] of Object.entries((node.properties ?? {}) as Record<string, Record<string, any>>)) walk(v, `${path}.${k}`);
      if (node.items) walk(node.items as Record<string, any>, `${path}[]`, true);
      // A record's values are described by the record (perImage: the price of one tier), unless they are objects.
      const values = node.additionalProperties as Record<string, any> | undefined;
      if (values && typeof values === 'object' && values.type === 'object') walk(values, `${path}{}`);
    };
    for (const crd of crds) {
      const props = crd.spec.versions[0]!.schema.openAPIV3Schema.properties as Record<string, Record<string, any>>;
      walk(props.spec!, `${crd.spec.names.kind}.spec`);
      walk(props.status!, `${crd.spec.names.kind}.status`);
    }
    expect(missing).toEqual([]);
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
    // What `kubectl get` shows; -o wide adds the priority-1 columns.
    const cols = (i: number) => crds[i]!.spec.versions[0]!.additionalPrinterColumns.filter((c) => !c.priority).map((c) => c.name.toUpperCase());
    expect(cols(0)).toEqual(['MODEL', 'TYPE', 'READY', 'AGE']);
    expect(cols(1)).toEqual(['CCONLY', 'MULTIPLIER', 'READY', 'AGE']);
    expect(cols(2)).toEqual(['GROUP', 'ACCOUNT', 'REVOKED', 'READY', 'AGE']);
    expect(crds.map((c) => c.spec.names.shortNames)).toEqual([['mr'], ['tgg'], ['ak']]);
  });

  it('conditions are a map keyed by type; Reason and Message show in -o wide; CEL rules where they fit', () => {
    for (const crd of crds) {
      const v = crd.spec.versions[0]!;
      const schema = v.schema.openAPIV3Schema;
      expect(schema.properties.status.properties.conditions).toMatchObject({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });
      expect(v.additionalPrinterColumns.filter((c) => ['Reason', 'Message'].includes(c.name))).toEqual([
        expect.objectContaining({ priority: 1, jsonPath: '.status.conditions[?(@.type=="Ready")].reason' }),
        expect.objectContaining({ priority: 1, jsonPath: '.status.conditions[?(@.type=="Ready")].message' }),
      ]);
    }
    const spec = (kind: string) => crds.find((c) => c.spec.names.kind === kind)!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec;
    expect(spec('ApiKey').properties.account['x-kubernetes-validations']).toEqual([{ rule: 'self == oldSelf', message: expect.stringContaining('immutable') }]);
    expect(spec('ModelRoute').properties.capabilities['x-kubernetes-validations'][0].rule).toContain('self.minDuration <= self.maxDuration');
    expect(spec('ModelRoute')['x-kubernetes-validations']).toEqual([
      expect.objectContaining({ rule: expect.stringContaining("self.type != 'chat'"), fieldPath: '.pricing', reason: 'FieldValueRequired' }),
    ]);
    expect(spec('Group')['x-kubernetes-validations'].map((r: { rule: string }) => r.rule)).toEqual([
      'has(self.models) || has(self.modelSelector)',
      expect.stringContaining('self.priceOverrides.all(m, m in self.models)'),
    ]);
    // A rule iterating a collection needs it bounded, or the API server refuses the CRD for its cost.
    expect(spec('Group').properties.models.maxItems).toBeGreaterThan(0);
    expect(spec('Group').properties.models.items.maxLength).toBeGreaterThan(0);
    expect(spec('Group').properties.priceOverrides.maxProperties).toBeGreaterThan(0);
  });

  it('zod holds the Group rule too: models or a modelSelector', () => {
    expect(GroupSpec.safeParse({ priceMultiplier: '2' }).error?.issues[0]?.message).toBe('name the models (models) or select them by label (modelSelector)');
    expect(GroupSpec.safeParse({ models: ['m'] }).success).toBe(true);
    expect(GroupSpec.safeParse({ modelSelector: { matchLabels: { tier: 'a' } } }).success).toBe(true);
  });

  it('zod holds the same duration rule as the CRD', () => {
    const route = (capabilities: object) =>
      ModelRouteSpec.safeParse({ type: 'video', backends: [{ provider: 'simulator', baseURL: 'http://127.0.0.1:1' }], capabilities });
    expect(route({ minDuration: 5, maxDuration: 10 }).success).toBe(true);
    const bad = route({ minDuration: 12, maxDuration: 10 });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]).toMatchObject({ message: 'minDuration must not exceed maxDuration', path: ['capabilities', 'minDuration'] });
  });

  it('turns records into additionalProperties and the Credentials union into one object', () => {
    const spec = crds[0]!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec;
    const backend = spec.properties.backends.items;
    expect(backend.properties.headers).toMatchObject({ type: 'object', additionalProperties: { type: 'string' } });
    expect(Object.keys(backend.properties.headers).sort()).toEqual(['additionalProperties', 'description', 'type']);
    expect(backend.properties.credentials.description).toMatch(/Exactly one of secretRef or env/);
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
