import type { CompileError } from '../api/snapshot/index.js';
import type { Condition, Kind } from '../api/v1alpha1/index.js';

/** The Ready condition the operator wants on one resource (no lastTransitionTime yet). */
export interface DesiredReady {
  status: 'True' | 'False';
  reason: string;
  message: string;
  observedGeneration?: number;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    labels?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
  spec?: Record<string, unknown>;
  status?: { conditions?: Condition[]; observedGeneration?: number; secretName?: string; [k: string]: unknown };
  data?: Record<string, string>;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export function refKey(kind: string, namespace: string | undefined, name: string): string {
  return `${kind}/${namespace ?? ''}/${name}`;
}

/** Compile errors grouped by the resource they name. */
export function errorsByResource(errors: CompileError[]): Map<string, CompileError[]> {
  const out = new Map<string, CompileError[]>();
  for (const e of errors) {
    const k = refKey(e.kind, e.namespace, e.name);
    out.set(k, [...(out.get(k) ?? []), e]);
  }
  return out;
}

/** A stable reason for an error, derived from the field and message compile() reports. */
export function reasonOf(e: CompileError): string {
  if (e.field.includes('credentials.secretRef')) return 'SecretNotFound';
  if (e.kind === 'Group' && e.field.startsWith('spec.models')) return 'ModelNotFound';
  if (e.kind === 'Group' && e.field.startsWith('spec.priceOverrides')) return 'ModelNotInGroup';
  if (e.kind === 'ApiKey' && e.field === 'spec.group') return 'GroupNotFound';
  if (/already|defined twice/.test(e.message)) return 'Conflict';
  return 'InvalidSpec';
}

export interface ReadyContext {
  kind: Kind;
  object: KubeObject;
  errors: CompileError[];
  /** ApiKey: the key is not in the snapshot because its Secret is not there yet. */
  keyPending?: string;
  /** ApiKey: the minted Secret's name is taken by a Secret this ApiKey does not own. */
  keyConflict?: string;
  now?: number;
}

/** Decides the Ready condition of one resource from the compile result: a pure function. */
export function desiredReady(ctx: ReadyContext): DesiredReady {
  const gen = ctx.object.metadata.generation;
  const withGen = (d: Omit<DesiredReady, 'observedGeneration'>): DesiredReady => (gen !== undefined ? { ...d, observedGeneration: gen } : d);
  if (ctx.errors.length > 0) {
    const [first] = ctx.errors;
    const more = ctx.errors.length > 1 ? ` (and ${ctx.errors.length - 1} more)` : '';
    return withGen({ status: 'False', reason: reasonOf(first!), message: `${first!.field}: ${first!.message}${more}` });
  }
  if (ctx.kind === 'ApiKey') {
    const spec = ctx.object.spec ?? {};
    if (spec.revoked === true) return withGen({ status: 'False', reason: 'Revoked', message: 'spec.revoked: the key is revoked and not served' });
    if (typeof spec.expiresAt === 'string' && Date.parse(spec.expiresAt) <= (ctx.now ?? Date.now())) {
      return withGen({ status: 'False', reason: 'Expired', message: `spec.expiresAt: the key expired at ${spec.expiresAt}` });
    }
    if (ctx.keyConflict) return withGen({ status: 'False', reason: 'SecretNameTaken', message: ctx.keyConflict });
    if (ctx.keyPending) return withGen({ status: 'False', reason: 'KeyPending', message: ctx.keyPending });
  }
  return withGen({ status: 'True', reason: 'Compiled', message: 'in the config snapshot' });
}

/** True when the resource's Ready condition differs from `want` (lastTransitionTime ignored). */
export function readyChanged(current: KubeObject['status'], want: DesiredReady): boolean {
  const c = current?.conditions?.find((x) => x.type === 'Ready');
  if (!c) return true;
  return (
    c.status !== want.status ||
    c.reason !== want.reason ||
    c.message !== want.message ||
    c.observedGeneration !== want.observedGeneration ||
    current?.observedGeneration !== want.observedGeneration
  );
}

/** The status to write: other conditions kept, Ready replaced, its transition time kept when the status did not flip. */
export function nextStatus(current: KubeObject['status'], want: DesiredReady, now: Date, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const others = (current?.conditions ?? []).filter((c) => c.type !== 'Ready');
  const prev = current?.conditions?.find((c) => c.type === 'Ready');
  const lastTransitionTime =
    prev && prev.status === want.status && prev.lastTransitionTime ? prev.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z');
  const ready: Condition = { type: 'Ready', ...want, lastTransitionTime };
  return {
    ...(current ?? {}),
    ...extra,
    ...(want.observedGeneration !== undefined ? { observedGeneration: want.observedGeneration } : {}),
    conditions: [...others, ready],
  };
}
