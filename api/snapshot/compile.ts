import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { Resource, type ApiKey, type Backend, type Group, type ModelRoute, type Pricing } from '../v1alpha1/index.js';
import { mulMicro, toMicro } from './money.js';
import type { CompileError, CompileResult, CompiledBackend, CompiledGroup, CompiledKey, CompiledModel, GatewayConfig, MicroPricing } from './types.js';

/** One input object: the raw manifest and, optionally, where it came from. */
export interface RawResource {
  object: unknown;
  source?: string;
}

export interface CompileOptions {
  /** In a cluster an ApiKey may lack keyHash: the operator mints a key and supplies its hash here. */
  cluster?: boolean;
  mintedKeyHash?: (key: ApiKey) => string | undefined;
  /** Resolves a backend's secretRef (operator only). Undefined -> the ModelRoute is invalid. */
  secret?: (namespace: string | undefined, name: string, key: string) => string | undefined;
  /** Clock for expiresAt; keys already expired leave the snapshot. */
  now?: number;
}

const DEFAULT_MAX_OUTPUT = 4096;
const DEFAULT_TIMEOUT_S = 600;

/**
 * Resources -> GatewayConfig plus a list of errors, each naming resource and field.
 * An invalid resource is left out and reported; everything valid still compiles.
 */
export function compile(inputs: RawResource[], opts: CompileOptions = {}): CompileResult {
  const errors: CompileError[] = [];
  const routes: { r: ModelRoute; source?: string }[] = [];
  const groups: { r: Group; source?: string }[] = [];
  const keys: { r: ApiKey; source?: string }[] = [];

  for (const input of inputs) {
    const parsed = parseResource(input);
    if ('errors' in parsed) {
      errors.push(...parsed.errors);
      continue;
    }
    const r = parsed.resource;
    if (r.kind === 'ModelRoute') routes.push({ r, source: input.source });
    else if (r.kind === 'Group') groups.push({ r, source: input.source });
    else keys.push({ r, source: input.source });
  }
  const byName = (a: { r: Resource }, b: { r: Resource }) => id(a.r).localeCompare(id(b.r));
  routes.sort(byName);
  groups.sort(byName);
  keys.sort(byName);

  const models: Record<string, CompiledModel> = {};
  const basePrices: Record<string, Pricing> = {};
  for (const { r, source } of routes) {
    const err = (field: string, message: string) => errors.push(errorOf(r, source, field, message));
    const code = r.spec.model ?? r.metadata.name;
    if (models[code]) {
      err('spec.model', `model code "${code}" is already defined by ${models[code].source}`);
      continue;
    }
    const backends: CompiledBackend[] = [];
    let ok = true;
    r.spec.backends.forEach((b, i) => {
      let credential: CompiledBackend['credential'];
      if (b.credentials && 'env' in b.credentials) credential = { env: b.credentials.env };
      else if (b.credentials && 'secretRef' in b.credentials) {
        const ref = b.credentials.secretRef;
        const value = opts.secret?.(r.metadata.namespace, ref.name, ref.key);
        if (value === undefined) {
          ok = false;
          err(
            `spec.backends[${i}].credentials.secretRef`,
            opts.secret ? `Secret "${ref.name}" (key "${ref.key}") was not found` : 'secretRef needs the operator; outside a cluster use credentials.env',
          );
          return;
        }
        credential = { value };
      }
      backends.push({
        provider: b.provider,
        baseURL: b.baseURL.replace(/\/+$/, ''),
        model: b.model ?? code,
        ...(credential ? { credential } : {}),
        weight: b.weight ?? 1,
        priority: b.priority ?? 0,
        ...(b.path ? { path: b.path } : {}),
        ...(b.paths ? { paths: compilePaths(b.paths) } : {}),
        ...(b.headers ? { headers: b.headers } : {}),
        ...(b.region ? { region: b.region } : {}),
        ...(b.project ? { project: b.project } : {}),
        ...(b.apiVersion ? { apiVersion: b.apiVersion } : {}),
        timeoutMs: (b.timeoutSeconds ?? DEFAULT_TIMEOUT_S) * 1000,
      });
    });
    if (!ok) continue;
    backends.sort((a, b) => a.priority - b.priority);
    models[code] = {
      model: code,
      type: r.spec.type,
      backends,
      capabilities: { ...(r.spec.capabilities ?? {}) },
      maxOutputTokens: r.spec.maxOutputTokens ?? DEFAULT_MAX_OUTPUT,
      labels: r.metadata.labels ?? {},
      source: `ModelRoute/${id(r)}`,
    };
    basePrices[code] = r.spec.pricing ?? {};
  }

  const compiledGroups: Record<string, CompiledGroup> = {};
  for (const { r, source } of groups) {
    const err = (field: string, message: string) => errors.push(errorOf(r, source, field, message));
    const name = r.metadata.name;
    if (compiledGroups[name]) {
      err('metadata.name', `group "${name}" is defined twice`);
      continue;
    }
    const before = errors.length;
    const codes = new Set<string>();
    (r.spec.models ?? []).forEach((m, i) => {
      if (!models[m]) err(`spec.models[${i}]`, `no valid ModelRoute defines model "${m}"`);
      else codes.add(m);
    });
    const sel = r.spec.modelSelector?.matchLabels;
    if (sel) {
      for (const m of Object.values(models)) {
        if (Object.entries(sel).every(([k, v]) => m.labels[k] === v)) codes.add(m.model);
      }
    }
    const multiplier = toMicro(r.spec.priceMultiplier ?? '1');
    for (const m of Object.keys(r.spec.priceOverrides ?? {})) {
      if (!codes.has(m)) err(`spec.priceOverrides.${m}`, `model "${m}" is not in this group`);
    }
    if (errors.length > before) continue;
    const prices: Record<string, MicroPricing> = {};
    for (const code of [...codes].sort()) {
      prices[code] = effectivePricing(basePrices[code] ?? {}, multiplier, r.spec.priceOverrides?.[code]);
    }
    compiledGroups[name] = {
      name,
      models: prices,
      ccOnly: r.spec.ccOnly ?? false,
      rateLimits: { ...(r.spec.rateLimits ?? {}) },
      disconnectPolicy: r.spec.disconnectPolicy ?? 'bill-delivered',
    };
  }

  const compiledKeys: Record<string, CompiledKey> = {};
  const now = opts.now ?? Date.now();
  for (const { r, source } of keys) {
    const err = (field: string, message: string) => errors.push(errorOf(r, source, field, message));
    if (!compiledGroups[r.spec.group]) {
      err('spec.group', `group "${r.spec.group}" does not exist or is invalid`);
      continue;
    }
    let hash = r.spec.keyHash;
    if (!hash) {
      hash = opts.mintedKeyHash?.(r);
      if (!hash) {
        if (!opts.cluster) err('spec.keyHash', 'keyHash is required outside a cluster (tollgate keys create prints one)');
        continue; // in a cluster: not minted yet, the operator reports it
      }
    }
    if (r.spec.revoked) continue;
    const expiresAt = r.spec.expiresAt ? Date.parse(r.spec.expiresAt) : undefined;
    if (expiresAt !== undefined && expiresAt <= now) continue;
    const hex = hash.slice('sha256:'.length);
    if (compiledKeys[hex]) {
      err('spec.keyHash', `the same key hash is already used by ApiKey "${compiledKeys[hex].name}"`);
      continue;
    }
    compiledKeys[hex] = {
      name: r.metadata.name,
      group: r.spec.group,
      account: r.spec.account,
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      ...(r.spec.spendLimit ? { spendLimit: toMicro(r.spec.spendLimit).toString() } : {}),
    };
  }

  const body = { models, groups: compiledGroups, keys: compiledKeys };
  const config: GatewayConfig = { version: contentVersion(body), ...body };
  return { config, errors };
}

export function parseResource(input: RawResource): { resource: Resource } | { errors: CompileError[] } {
  const obj = input.object as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } } | null;
  const kind = typeof obj?.kind === 'string' ? obj.kind : '(unknown kind)';
  const name = typeof obj?.metadata?.name === 'string' ? obj.metadata.name : '(unnamed)';
  const namespace = typeof obj?.metadata?.namespace === 'string' ? obj.metadata.namespace : undefined;
  const res = Resource.safeParse(input.object);
  if (res.success) return { resource: res.data };
  return {
    errors: res.error.issues.map((issue) => ({
      kind,
      name,
      ...(namespace ? { namespace } : {}),
      ...(input.source ? { source: input.source } : {}),
      field: fieldPath(issue),
      message: issueMessage(issue),
    })),
  };
}

function issueMessage(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (issue.code === 'invalid_union' && issue.path.length === 0) return 'kind must be one of ModelRoute, Group, ApiKey (apiVersion tollgate.dev/v1alpha1)';
  return issue.message;
}

function fieldPath(issue: z.core.$ZodIssue): string {
  let out = '';
  for (const p of issue.path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || '(root)';
}

/** Base price x multiplier, unless the group overrides that field. */
export function effectivePricing(base: Pricing, multiplier: bigint, override?: Pricing): MicroPricing {
  const scalar = (field: 'inputPerMillion' | 'cachedInputPerMillion' | 'outputPerMillion' | 'audioPerSecond') => {
    const o = override?.[field];
    if (o !== undefined) return toMicro(o).toString();
    const b = base[field];
    return b === undefined ? undefined : mulMicro(toMicro(b), multiplier).toString();
  };
  const table = (field: 'perImage' | 'perSecond') => {
    const keys = new Set([...Object.keys(base[field] ?? {}), ...Object.keys(override?.[field] ?? {})]);
    if (keys.size === 0) return undefined;
    const out: Record<string, string> = {};
    for (const k of [...keys].sort()) {
      const o = override?.[field]?.[k];
      out[k] = o !== undefined ? toMicro(o).toString() : mulMicro(toMicro(base[field]![k]!), multiplier).toString();
    }
    return out;
  };
  const out: MicroPricing = {};
  for (const f of ['inputPerMillion', 'cachedInputPerMillion', 'outputPerMillion', 'audioPerSecond'] as const) {
    const v = scalar(f);
    if (v !== undefined) out[f] = v;
  }
  for (const f of ['perImage', 'perSecond'] as const) {
    const v = table(f);
    if (v !== undefined) out[f] = v;
  }
  return out;
}

function id(r: Resource): string {
  return r.metadata.namespace ? `${r.metadata.namespace}/${r.metadata.name}` : r.metadata.name;
}

function errorOf(r: Resource, source: string | undefined, field: string, message: string): CompileError {
  return {
    kind: r.kind,
    name: r.metadata.name,
    ...(r.metadata.namespace ? { namespace: r.metadata.namespace } : {}),
    ...(source ? { source } : {}),
    field,
    message,
  };
}

/** Stable JSON (sorted keys) hashed: the same resources give the same version on every operator. */
export function contentVersion(value: unknown): string {
  return createHash('sha256').update(stableJson(value)).digest('hex').slice(0, 16);
}

function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${stableJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

export function formatCompileError(e: CompileError): string {
  const where = e.source ? `${e.source}: ` : '';
  const ns = e.namespace ? `${e.namespace}/` : '';
  return `${where}${e.kind} ${ns}${e.name}: ${e.field}: ${e.message}`;
}

/** A backend's `paths` under the operation names the proxy uses. */
function compilePaths(p: NonNullable<Backend['paths']>): NonNullable<CompiledBackend['paths']> {
  const out: NonNullable<CompiledBackend['paths']> = {};
  if (p.chatCompletions) out['chat-completions'] = p.chatCompletions;
  if (p.responses) out.responses = p.responses;
  if (p.messages) out.messages = p.messages;
  if (p.countTokens) out['count-tokens'] = p.countTokens;
  return out;
}
