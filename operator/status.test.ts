import { describe, expect, it } from 'vitest';
import { desiredReady, nextStatus, readyChanged, reasonOf } from './status.js';

const obj = (spec: Record<string, unknown> = {}, generation = 3) => ({ metadata: { name: 'x', namespace: 'ns', generation }, spec });
const err = (kind: string, field: string, message = 'bad') => ({ kind, name: 'x', namespace: 'ns', field, message });

describe('Ready condition', () => {
  it('names the first error field, counts the rest and carries observedGeneration', () => {
    const d = desiredReady({
      kind: 'Group',
      object: obj(),
      errors: [err('Group', 'spec.models[1]', 'no valid ModelRoute defines model "y"'), err('Group', 'spec.priceOverrides.z')],
    });
    expect(d).toEqual({
      status: 'False',
      reason: 'ModelNotFound',
      message: 'spec.models[1]: no valid ModelRoute defines model "y" (and 1 more)',
      observedGeneration: 3,
    });
  });

  it('maps compile errors to stable reasons', () => {
    expect(reasonOf(err('ModelRoute', 'spec.backends[0].credentials.secretRef'))).toBe('SecretNotFound');
    expect(reasonOf(err('Group', 'spec.priceOverrides.m'))).toBe('ModelNotInGroup');
    expect(reasonOf(err('ApiKey', 'spec.group'))).toBe('GroupNotFound');
    expect(reasonOf(err('ModelRoute', 'spec.model', 'model code "m" is already defined by ModelRoute/a'))).toBe('Conflict');
    expect(reasonOf(err('ModelRoute', 'spec.pricing.inputPerMillion'))).toBe('InvalidSpec');
  });

  it('ApiKeys: revoked, expired, name taken, pending, in that order; otherwise Compiled', () => {
    const now = Date.parse('2026-11-23T12:00:00Z');
    const ctx = (spec: Record<string, unknown>, extra = {}) => desiredReady({ kind: 'ApiKey', object: obj(spec), errors: [], now, ...extra });
    expect(ctx({ revoked: true }, { keyPending: 'w' }).reason).toBe('Revoked');
    expect(ctx({ expiresAt: '2026-11-23T11:59:59Z' }).reason).toBe('Expired');
    expect(ctx({ expiresAt: '2026-11-23T12:00:01Z' }).reason).toBe('Compiled');
    expect(ctx({}, { keyConflict: 'taken', keyPending: 'w' }).reason).toBe('SecretNameTaken');
    expect(ctx({}, { keyPending: 'w' })).toMatchObject({ status: 'False', reason: 'KeyPending' });
    expect(ctx({})).toEqual({ status: 'True', reason: 'Compiled', message: 'in the config snapshot', observedGeneration: 3 });
  });

  it('changed only when status, reason, message or generation differ; the transition time stays while the status holds', () => {
    const want = { status: 'False' as const, reason: 'R', message: 'm', observedGeneration: 3 };
    const first = nextStatus(undefined, want, new Date('2026-11-23T10:00:00.500Z'));
    expect(first).toMatchObject({ observedGeneration: 3, conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: '2026-11-23T10:00:00Z' }] });
    expect(readyChanged(first, want)).toBe(false);
    expect(readyChanged(first, { ...want, message: 'other' })).toBe(true);
    expect(readyChanged(first, { ...want, observedGeneration: 4 })).toBe(true);
    const again = nextStatus(first, { ...want, message: 'other', observedGeneration: 4 }, new Date('2026-11-23T11:00:00Z'));
    expect((again.conditions as { lastTransitionTime: string }[])[0]!.lastTransitionTime).toBe('2026-11-23T10:00:00Z');
    const flipped = nextStatus(first, { status: 'True', reason: 'Compiled', message: 'ok', observedGeneration: 4 }, new Date('2026-11-23T11:00:00Z'));
    expect((flipped.conditions as { lastTransitionTime: string }[])[0]!.lastTransitionTime).toBe('2026-11-23T11:00:00Z');
    // Conditions of other types are kept.
    const withOther = nextStatus({ conditions: [{ type: 'Other', status: 'True', reason: 'x', message: 'y' }] }, want, new Date());
    expect((withOther.conditions as { type: string }[]).map((c) => c.type)).toEqual(['Other', 'Ready']);
  });
});
