import { stringify } from 'yaml';
import { z } from 'zod';
import { GROUP, VERSION } from './common.js';
import { KIND_INFO, KINDS, type Kind } from './index.js';

/**
 * CustomResourceDefinitions (apiextensions.k8s.io/v1) derived from the zod schemas, which stay the
 * single source of truth. zod's JSON Schema is post-processed into a Kubernetes structural schema:
 * every node typed, no $ref / const / propertyNames / additionalProperties:false, records as
 * `additionalProperties: {type: string}`, the Credentials union as one object with a oneOf of
 * required lists. `npm run crds` writes the result into crds/; a test fails when that is stale.
 */

type Schema = Record<string, unknown>;

const READY = '.status.conditions[?(@.type=="Ready")].status';
const AGE = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

// Why a resource is (not) Ready, in `kubectl get -o wide`.
const REASON = { name: 'Reason', type: 'string', priority: 1, jsonPath: '.status.conditions[?(@.type=="Ready")].reason' };
const MESSAGE = { name: 'Message', type: 'string', priority: 1, jsonPath: '.status.conditions[?(@.type=="Ready")].message' };

const PRINTER_COLUMNS: Record<Kind, object[]> = {
  ModelRoute: [
    // status.model, not spec.model: spec.model is usually left to default to the name.
    { name: 'Model', type: 'string', jsonPath: '.status.model' },
    { name: 'Type', type: 'string', jsonPath: '.spec.type' },
    { name: 'Ready', type: 'string', jsonPath: READY },
    AGE,
    REASON,
    MESSAGE,
  ],
  Group: [
    { name: 'CCOnly', type: 'boolean', jsonPath: '.spec.ccOnly' },
    { name: 'Multiplier', type: 'string', jsonPath: '.spec.priceMultiplier' },
    { name: 'Ready', type: 'string', jsonPath: READY },
    AGE,
    REASON,
    MESSAGE,
  ],
  ApiKey: [
    { name: 'Group', type: 'string', jsonPath: '.spec.group' },
    { name: 'Account', type: 'string', jsonPath: '.spec.account' },
    { name: 'Revoked', type: 'boolean', jsonPath: '.spec.revoked' },
    { name: 'Ready', type: 'string', jsonPath: READY },
    AGE,
    REASON,
    MESSAGE,
  ],
};

/** String formats the apiserver knows; anything else zod emits (e.g. starts_with) is dropped. */
const K8S_FORMATS = new Set(['uri', 'date-time', 'date', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid', 'byte', 'duration']);
const SAFE_INT = Number.MAX_SAFE_INTEGER;

export function generateCrds(): object[] {
  return KINDS.map((kind) => crdFor(kind));
}

/** What `tollgate crds --out DIR` writes: crds/<plural>.tollgate.dev.yaml, one CRD per file. */
export function crdFiles(): { file: string; yaml: string }[] {
  return KINDS.map((kind) => ({ file: `${crdName(kind)}.yaml`, yaml: crdYaml(crdFor(kind)) }));
}

export function crdYaml(crd: object): string {
  return `# Generated from api/v1alpha1 by \`npm run crds\`: do not edit.\n${stringify(crd, { lineWidth: 0 })}`;
}

export function crdName(kind: Kind): string {
  return `${KIND_INFO[kind].plural}.${GROUP}`;
}

function crdFor(kind: Kind) {
  const info = KIND_INFO[kind];
  const json = z.toJSONSchema(info.schema, { io: 'input', unrepresentable: 'throw' }) as Schema;
  const props = json.properties as Record<string, Schema>;
  const openAPIV3Schema = {
    type: 'object',
    description: `${kind} (${GROUP}/${VERSION}); see the README, section Kubernetes.`,
    properties: {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      spec: structural(props.spec!),
      status: structural(props.status!),
    },
    required: ['spec'],
  };
  // Conditions are a map keyed by type: one of each, merged by type in server-side apply.
  const conditions = (openAPIV3Schema.properties.status.properties as Record<string, Schema> | undefined)?.conditions;
  if (conditions) Object.assign(conditions, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName(kind) },
    spec: {
      group: GROUP,
      names: {
        kind,
        listKind: `${kind}List`,
        plural: info.plural,
        singular: info.singular,
        shortNames: [...info.shortNames],
        categories: ['tollgate'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema },
          subresources: { status: {} },
          additionalPrinterColumns: PRINTER_COLUMNS[kind],
        },
      ],
    },
  };
}

/** One zod JSON Schema node -> a structural schema node. */
function structural(node: Schema): Schema {
  if (Array.isArray(node.anyOf) || Array.isArray(node.oneOf)) {
    const merged = mergeUnion((node.anyOf ?? node.oneOf) as Schema[]);
    return typeof node.description === 'string' ? { description: node.description, ...merged } : merged;
  }
  const out: Schema = {};
  if (typeof node.description === 'string') out.description = node.description;
  // CEL rules attached in api/v1alpha1 with .meta(cel(...)) (see CelRule).
  const rules = node['x-kubernetes-validations'];
  if ('const' in node) {
    out.type = typeof node.const === 'boolean' ? 'boolean' : typeof node.const === 'number' ? 'number' : 'string';
    out.enum = [node.const];
    return out;
  }
  const type = node.type;
  if (typeof type !== 'string') throw new Error(`crd: schema node without a single type: ${JSON.stringify(node).slice(0, 200)}`);
  out.type = type;
  switch (type) {
    case 'string': {
      if (Array.isArray(node.enum)) out.enum = node.enum;
      const format = typeof node.format === 'string' && K8S_FORMATS.has(node.format) ? node.format : undefined;
      if (format) out.format = format;
      // date-time carries its own (long) regex in zod; the format says it already.
      if (typeof node.pattern === 'string' && format !== 'date-time') out.pattern = node.pattern;
      if (typeof node.minLength === 'number') out.minLength = node.minLength;
      if (typeof node.maxLength === 'number') out.maxLength = node.maxLength;
      break;
    }
    case 'integer':
    case 'number':
      if (typeof node.minimum === 'number' && node.minimum > -SAFE_INT) out.minimum = node.minimum;
      if (typeof node.maximum === 'number' && node.maximum < SAFE_INT) out.maximum = node.maximum;
      if (Array.isArray(node.enum)) out.enum = node.enum;
      break;
    case 'boolean':
      break;
    case 'array':
      out.items = structural(node.items as Schema);
      if (typeof node.minItems === 'number') out.minItems = node.minItems;
      if (typeof node.maxItems === 'number') out.maxItems = node.maxItems;
      break;
    case 'object': {
      const props = node.properties as Record<string, Schema> | undefined;
      const extra = node.additionalProperties;
      if (props && Object.keys(props).length > 0) {
        out.properties = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, structural(v)]));
        if (Array.isArray(node.required) && node.required.length > 0) out.required = node.required;
      } else if (extra && typeof extra === 'object' && Object.keys(extra).length > 0) {
        out.additionalProperties = structural(extra as Schema); // a record
        if (typeof node.maxProperties === 'number') out.maxProperties = node.maxProperties;
      } else if (extra !== false) {
        out['x-kubernetes-preserve-unknown-fields'] = true; // a loose object with no known fields
      }
      break;
    }
    default:
      throw new Error(`crd: unsupported type ${String(type)}`);
  }
  if (Array.isArray(rules) && rules.length > 0) out['x-kubernetes-validations'] = rules;
  return out;
}

/**
 * A union of objects (Credentials) -> one object holding every member's properties, with a
 * oneOf of `required` lists so that exactly one member's fields are set.
 */
function mergeUnion(members: Schema[]): Schema {
  const properties: Record<string, Schema> = {};
  const oneOf: Schema[] = [];
  for (const m of members) {
    if (m.type !== 'object') throw new Error('crd: only unions of objects are supported');
    for (const [k, v] of Object.entries((m.properties ?? {}) as Record<string, Schema>)) properties[k] = structural(v);
    const required = (m.required ?? []) as string[];
    if (required.length > 0) oneOf.push({ required });
  }
  return { type: 'object', properties, ...(oneOf.length > 0 ? { oneOf } : {}) };
}

// ---- structural-schema check: what the apiserver would reject, found without one ----

const ALLOWED_KEYS = new Set([
  'type',
  'description',
  'properties',
  'required',
  'items',
  'additionalProperties',
  'enum',
  'format',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
  'uniqueItems',
  'minProperties',
  'maxProperties',
  'default',
  'nullable',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'title',
  'example',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
]);
/** Inside oneOf/anyOf/allOf/not only value validations may appear (no type, no x-kubernetes-*). */
const JUNCTOR_FORBIDDEN = ['type', 'description', 'default', 'nullable', 'additionalProperties', 'items', 'properties'];
const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean']);

/** Every violation of the structural-schema rules below `schema`, each with its JSON path. */
export function checkStructural(schema: unknown, path = 'openAPIV3Schema'): string[] {
  const errs: string[] = [];
  walk(schema, path, false, errs, true);
  return errs;
}

function walk(node: unknown, path: string, inJunctor: boolean, errs: string[], root = false): void {
  if (!node || typeof node !== 'object' || Array.isArray(node)) {
    errs.push(`${path}: must be a schema object`);
    return;
  }
  const n = node as Schema;
  for (const key of Object.keys(n)) {
    if (!ALLOWED_KEYS.has(key)) errs.push(`${path}: "${key}" is not allowed in a CRD schema`);
  }
  if (inJunctor) {
    for (const key of JUNCTOR_FORBIDDEN) if (key in n) errs.push(`${path}: "${key}" must not appear inside oneOf/anyOf/allOf/not`);
    for (const key of Object.keys(n)) if (key.startsWith('x-kubernetes-')) errs.push(`${path}: "${key}" must not appear inside oneOf/anyOf/allOf/not`);
  } else {
    const t = n.type;
    const intOrString = n['x-kubernetes-int-or-string'] === true;
    const preserve = n['x-kubernetes-preserve-unknown-fields'] === true;
    if (t === undefined && !intOrString && !preserve) errs.push(`${path}: every node needs a type`);
    if (t !== undefined && (typeof t !== 'string' || !TYPES.has(t))) errs.push(`${path}: type ${JSON.stringify(t)} is not a single known type`);
    if (root && t !== 'object') errs.push(`${path}: the root must be type object`);
    if (intOrString && t !== undefined) errs.push(`${path}: x-kubernetes-int-or-string must not carry a type`);
    if ('properties' in n && t !== 'object') errs.push(`${path}: properties on a non-object`);
    if ('items' in n && t !== 'array') errs.push(`${path}: items on a non-array`);
    if (t === 'array' && !('items' in n)) errs.push(`${path}: an array needs items`);
    if ('x-kubernetes-list-type' in n && t !== 'array') errs.push(`${path}: x-kubernetes-list-type on a non-array`);
    if ('x-kubernetes-map-type' in n && t !== 'object') errs.push(`${path}: x-kubernetes-map-type on a non-object`);
    if (preserve && t !== undefined && t !== 'object') errs.push(`${path}: x-kubernetes-preserve-unknown-fields on a non-object`);
    if ('x-kubernetes-embedded-resource' in n && t !== 'object') errs.push(`${path}: x-kubernetes-embedded-resource on a non-object`);
  }
  if ('additionalProperties' in n) {
    const ap = n.additionalProperties;
    if ('properties' in n) errs.push(`${path}: additionalProperties together with properties`);
    if (typeof ap === 'boolean') errs.push(`${path}: additionalProperties must be a schema, not ${String(ap)}`);
    else walk(ap, `${path}.additionalProperties`, inJunctor, errs);
  }
  if (root) {
    const meta = (n.properties as Record<string, Schema> | undefined)?.metadata;
    if (meta && Object.keys(meta).some((k) => k !== 'type')) errs.push(`${path}.properties.metadata: must be only {type: object}`);
  }
  if (n.properties && typeof n.properties === 'object') {
    for (const [k, v] of Object.entries(n.properties as Record<string, unknown>)) walk(v, `${path}.properties.${k}`, inJunctor, errs);
  }
  if ('items' in n) {
    if (Array.isArray(n.items)) errs.push(`${path}: items must be one schema, not a list`);
    else walk(n.items, `${path}.items`, inJunctor, errs);
  }
  for (const j of ['oneOf', 'anyOf', 'allOf'] as const) {
    if (j in n) {
      if (!Array.isArray(n[j])) errs.push(`${path}.${j}: must be a list`);
      else (n[j] as unknown[]).forEach((s, i) => walk(s, `${path}.${j}[${i}]`, true, errs));
    }
  }
  if ('not' in n) walk(n.not, `${path}.not`, true, errs);
}
