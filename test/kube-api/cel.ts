import { Environment, type ParseResult } from '@marcbachmann/cel-js';

/**
 * `x-kubernetes-validations` as the API server checks them (apiextensions-apiserver's CEL
 * validator), evaluated with @marcbachmann/cel-js:
 * - every rule of a schema node runs with `self` bound to the value there, typed from the schema
 *   (integer -> int, number -> double, objects with properties -> objects whose fields the type
 *   checker knows, additionalProperties -> map, arrays -> list); fields the schema does not know
 *   are pruned first, as the API server prunes before it validates;
 * - a rule that mentions `oldSelf` is a transition rule: it runs on updates only, where the old
 *   object has a value at the same place (object fields, map keys and list-type=map items
 *   correlate; items of other lists do not);
 * - ratcheting: on an update a value equal to its old value is not checked again, so an object
 *   stored before a rule existed can still be changed elsewhere;
 * - a failed rule is a field error at the node's path (plus the rule's fieldPath) with its
 *   message (or messageExpression) and reason: Invalid value: "<type>": <message>, Required
 *   value, Forbidden or Duplicate value; an evaluation error is one too.
 * CRDs whose rules do not parse or type-check are refused (crdRuleErrors), as the API server
 * refuses them. Not modelled: cost estimation and the runtime cost limit, Kubernetes' CEL
 * libraries (strings, lists, regex, url, ip, quantity, format), optionalOldSelf, and
 * date-time/duration strings as timestamp/duration values.
 */

type Obj = Record<string, any>;

export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  fieldPath?: string;
}

export interface FieldError {
  /** e.g. spec.capabilities */
  field: string;
  reason: NonNullable<ValidationRule['reason']>;
  /** The error body: `Invalid value: "object": minDuration must not exceed maxDuration`. */
  message: string;
}

/** One compiled rule: its program, whether it is a transition rule, and its message expression. */
interface Compiled {
  program: ParseResult;
  transition: boolean;
  messageProgram?: ParseResult;
}

const compiledCache = new WeakMap<Obj, Compiled[]>();

/** The errors in a CRD version's schema rules (empty when every rule compiles), each at its path. */
export function crdRuleErrors(schema: Obj, path: string): string[] {
  const errs: string[] = [];
  walkSchema(schema, path, (node, at) => {
    const rules = node['x-kubernetes-validations'] as ValidationRule[] | undefined;
    if (!Array.isArray(rules)) return;
    rules.forEach((r, i) => {
      const where = `${at}.x-kubernetes-validations[${i}]`;
      if (typeof r?.rule !== 'string' || r.rule.trim() === '') return void errs.push(`${where}.rule: Required value`);
      const env = environment(node, /\boldSelf\b/.test(r.rule));
      const checked = safeCheck(env, r.rule);
      if (checked) errs.push(`${where}.rule: Invalid value: ${JSON.stringify(r.rule)}: compilation failed: ${checked}`);
      if (r.messageExpression !== undefined) {
        const m = safeCheck(env, r.messageExpression, 'string');
        if (m) errs.push(`${where}.messageExpression: Invalid value: ${JSON.stringify(r.messageExpression)}: messageExpression compilation failed: ${m}`);
      }
      if (r.fieldPath !== undefined && !resolvesIn(node, r.fieldPath))
        errs.push(`${where}.fieldPath: Invalid value: ${JSON.stringify(r.fieldPath)}: fieldPath must be a valid path`);
      if (r.reason !== undefined && !['FieldValueInvalid', 'FieldValueForbidden', 'FieldValueRequired', 'FieldValueDuplicate'].includes(r.reason))
        errs.push(
          `${where}.reason: Unsupported value: ${JSON.stringify(r.reason)}: supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"`,
        );
    });
  });
  return errs;
}

/**
 * The field errors of `obj` (after defaulting) against the rules in `schema`, with `old` the stored
 * object on an update. The root's metadata is not validated here.
 */
export function validateRules(schema: Obj, obj: Obj, old?: Obj): FieldError[] {
  const errs: FieldError[] = [];
  for (const [k, sub] of Object.entries((schema.properties ?? {}) as Record<string, Obj>)) {
    if (k === 'metadata' || k === 'apiVersion' || k === 'kind') continue;
    validateNode(sub, obj[k], old ? { value: old[k] } : undefined, k, errs);
  }
  const rootRules = schema['x-kubernetes-validations'] as ValidationRule[] | undefined;
  if (rootRules) runRules(schema, rootRules, obj, old ? { value: old } : undefined, '<root>', errs);
  return errs;
}

/** `old` is undefined when nothing correlates with this value (a create, a new key, a plain list's item). */
function validateNode(schema: Obj, value: unknown, old: { value: unknown } | undefined, path: string, errs: FieldError[]): void {
  if (value === undefined || value === null) return;
  // Ratcheting: an unchanged value keeps whatever it was accepted with.
  if (old && old.value !== undefined && deepEqual(value, old.value)) return;
  const oldValue = old?.value;
  if (schema.type === 'object' && value && typeof value === 'object' && !Array.isArray(value)) {
    const o = value as Obj;
    const oldObj = oldValue && typeof oldValue === 'object' && !Array.isArray(oldValue) ? (oldValue as Obj) : undefined;
    if (schema.properties) {
      for (const [k, sub] of Object.entries(schema.properties as Record<string, Obj>))
        validateNode(sub, o[k], oldObj && k in oldObj ? { value: oldObj[k] } : undefined, `${path}.${k}`, errs);
    } else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
      for (const [k, v] of Object.entries(o))
        validateNode(schema.additionalProperties as Obj, v, oldObj && k in oldObj ? { value: oldObj[k] } : undefined, `${path}[${k}]`, errs);
    }
  } else if (schema.type === 'array' && Array.isArray(value) && schema.items) {
    const keys = schema['x-kubernetes-list-type'] === 'map' ? ((schema['x-kubernetes-list-map-keys'] ?? []) as string[]) : undefined;
    const oldList = Array.isArray(oldValue) ? (oldValue as Obj[]) : [];
    value.forEach((item, i) => {
      const match = keys?.length ? oldList.find((x) => keys.every((k) => deepEqual(x?.[k], (item as Obj)?.[k]))) : undefined;
      validateNode(schema.items as Obj, item, match !== undefined ? { value: match } : undefined, `${path}[${i}]`, errs);
    });
  }
  const rules = schema['x-kubernetes-validations'] as ValidationRule[] | undefined;
  if (rules) runRules(schema, rules, value, old, path, errs);
}

function runRules(schema: Obj, rules: ValidationRule[], value: unknown, old: { value: unknown } | undefined, path: string, errs: FieldError[]) {
  const compiled = compile(schema, rules);
  const self = celValue(schema, value);
  rules.forEach((r, i) => {
    const c = compiled[i]!;
    if (c.transition && (old === undefined || old.value === undefined || old.value === null)) return;
    const ctx = c.transition ? { self, oldSelf: celValue(schema, old!.value) } : { self };
    const field = `${path}${r.fieldPath ?? ''}`.replace(/^<root>\.?/, '');
    let ok: unknown;
    try {
      ok = c.program(ctx);
    } catch (err) {
      errs.push({ field, reason: 'FieldValueInvalid', message: `Invalid value: "${schema.type}": ${errText(err)} evaluating rule: ${r.rule}` });
      return;
    }
    if (ok === true) return;
    let message = r.message ?? `failed rule: ${r.rule}`;
    if (c.messageProgram) {
      try {
        const m = c.messageProgram(ctx);
        if (typeof m === 'string' && m.trim() !== '' && !m.includes('\n')) message = m;
      } catch {
        // An erroring messageExpression falls back to message, as the API server does.
      }
    }
    errs.push(fieldError(field, schema.type, message, r.reason ?? 'FieldValueInvalid'));
  });
}

function fieldError(field: string, type: unknown, message: string, reason: NonNullable<ValidationRule['reason']>): FieldError {
  switch (reason) {
    case 'FieldValueRequired':
      return { field, reason, message: `Required value: ${message}` };
    case 'FieldValueForbidden':
      return { field, reason, message: `Forbidden: ${message}` };
    case 'FieldValueDuplicate':
      return { field, reason, message: `Duplicate value: ${JSON.stringify(type)}` };
    default:
      return { field, reason, message: `Invalid value: ${JSON.stringify(type)}: ${message}` };
  }
}

function compile(schema: Obj, rules: ValidationRule[]): Compiled[] {
  let c = compiledCache.get(schema);
  if (c) return c;
  c = rules.map((r) => {
    const transition = /\boldSelf\b/.test(r.rule);
    const env = environment(schema, transition);
    return {
      program: env.parse(r.rule),
      transition,
      ...(r.messageExpression ? { messageProgram: env.parse(r.messageExpression) } : {}),
    };
  });
  compiledCache.set(schema, c);
  return c;
}

/** An environment with `self` (and `oldSelf`) typed from the schema node. */
function environment(schema: Obj, withOld: boolean): Environment {
  const env = new Environment({ homogeneousAggregateLiterals: false });
  const decl = celType(schema);
  if (typeof decl === 'string') {
    env.registerVariable('self', decl);
    if (withOld) env.registerVariable('oldSelf', decl);
  } else {
    env.registerVariable({ name: 'self', schema: decl });
    if (withOld) env.registerVariable({ name: 'oldSelf', schema: decl });
  }
  return env;
}

type CelSchema = string | { [field: string]: CelSchema };

/** The schema node's CEL type: a type name, or a field map for an object with properties. */
function celType(schema: Obj): CelSchema {
  switch (schema.type) {
    case 'string':
      return 'string';
    case 'integer':
      return 'int';
    case 'number':
      return 'double';
    case 'boolean':
      return 'bool';
    case 'array': {
      const item = schema.items ? celType(schema.items as Obj) : 'dyn';
      return `list<${typeof item === 'string' ? item : 'dyn'}>`;
    }
    case 'object': {
      if (schema.properties) {
        // A typed object (the checker knows its fields); inside a list or a map it is dyn.
        return Object.fromEntries(Object.entries(schema.properties as Record<string, Obj>).map(([k, v]) => [k, celType(v)]));
      }
      if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
        const v = celType(schema.additionalProperties as Obj);
        return `map<string, ${typeof v === 'string' ? v : 'dyn'}>`;
      }
      return 'dyn';
    }
    default:
      return 'dyn';
  }
}

/** The value as CEL sees it: pruned to the schema's fields, integers as int (bigint). */
function celValue(schema: Obj | undefined, value: unknown): unknown {
  if (value === null || value === undefined || !schema) return value;
  switch (schema.type) {
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : value;
    case 'array':
      return Array.isArray(value) ? value.map((v) => celValue(schema.items as Obj | undefined, v)) : value;
    case 'object': {
      if (typeof value !== 'object' || Array.isArray(value)) return value;
      const o = value as Obj;
      if (schema.properties) {
        const out: Obj = {};
        for (const [k, sub] of Object.entries(schema.properties as Record<string, Obj>)) if (o[k] !== undefined) out[k] = celValue(sub, o[k]);
        return out;
      }
      if (schema.additionalProperties && typeof schema.additionalProperties === 'object')
        return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, celValue(schema.additionalProperties as Obj, v)]));
      return o;
    }
    default:
      return value;
  }
}

/** A rule's fieldPath (.a.b, ['key'], [0]) names a property of the node's schema. */
function resolvesIn(schema: Obj, fieldPath: string): boolean {
  const parts = fieldPath.match(/\.[A-Za-z_][A-Za-z0-9_]*|\['[^']*'\]|\[\d+\]/g);
  if (!parts || parts.join('') !== fieldPath) return false;
  let node: Obj | undefined = schema;
  for (const p of parts) {
    if (!node) return false;
    if (p.startsWith('.')) node = (node.properties as Record<string, Obj> | undefined)?.[p.slice(1)];
    else if (p.startsWith("['"))
      node = (node.properties as Record<string, Obj> | undefined)?.[p.slice(2, -2)] ?? (node.additionalProperties as Obj | undefined);
    else node = node.items as Obj | undefined;
  }
  return node !== undefined;
}

function walkSchema(node: Obj, path: string, visit: (node: Obj, path: string) => void): void {
  if (!node || typeof node !== 'object') return;
  visit(node, path);
  for (const [k, sub] of Object.entries((node.properties ?? {}) as Record<string, Obj>)) walkSchema(sub, `${path}.properties[${k}]`, visit);
  if (node.items && typeof node.items === 'object') walkSchema(node.items as Obj, `${path}.items`, visit);
  if (node.additionalProperties && typeof node.additionalProperties === 'object')
    walkSchema(node.additionalProperties as Obj, `${path}.additionalProperties`, visit);
}

function safeCheck(env: Environment, expr: string, want = 'bool'): string | undefined {
  try {
    const r = env.check(expr);
    if (!r.valid) return errText(r.error);
    if (r.type && r.type !== want && r.type !== 'dyn') return `cel expression must evaluate to a ${want}`;
    return undefined;
  } catch (err) {
    return errText(err);
  }
}

function errText(err: unknown): string {
  const e = err as { summary?: string; message?: string } | undefined;
  return (e?.summary ?? e?.message ?? String(err)).split('\n')[0]!;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a as Obj);
  const kb = Object.keys(b as Obj);
  return ka.length === kb.length && ka.every((k) => deepEqual((a as Obj)[k], (b as Obj)[k]));
}
