import { describe, expect, it } from 'vitest';
import { eventBody, readyEventOf } from './events.js';

describe('Ready events', () => {
  const want = { status: 'False' as const, reason: 'ModelNotFound', message: 'spec.models[0]: no valid ModelRoute defines model "x"', observedGeneration: 2 };

  it('an Event when Ready appears, flips or changes reason; none when only the message or generation moved', () => {
    expect(readyEventOf(undefined, want)).toEqual({ type: 'Warning', reason: 'ModelNotFound', message: want.message });
    expect(readyEventOf({ status: 'True', reason: 'Compiled' }, want)?.type).toBe('Warning');
    expect(readyEventOf({ status: 'False', reason: 'InvalidSpec' }, want)?.reason).toBe('ModelNotFound');
    expect(readyEventOf({ status: 'False', reason: 'ModelNotFound' }, { ...want, message: 'other', observedGeneration: 3 })).toBeUndefined();
    expect(readyEventOf({ status: 'False', reason: 'Revoked' }, { status: 'True', reason: 'Compiled', message: 'in the config snapshot' })?.type).toBe(
      'Normal',
    );
    // Waiting for the minted Secret is transient: KeyMinted follows.
    expect(readyEventOf(undefined, { status: 'False', reason: 'KeyPending', message: 'waiting' })).toBeUndefined();
    expect(readyEventOf(undefined, { status: 'False', reason: 'SecretNameTaken', message: 'taken' })?.type).toBe('Warning');
  });

  it('names the object it is about and keeps messages within the API limit', () => {
    const body = eventBody(
      'Group',
      { metadata: { name: 'g', namespace: 'ns', uid: 'u1', resourceVersion: '7' } },
      { type: 'Warning', reason: 'R', message: 'x'.repeat(2000) },
      'op-1',
      new Date('2026-11-23T10:00:00.123Z'),
    );
    expect(body.involvedObject).toEqual({ apiVersion: 'tollgate.dev/v1alpha1', kind: 'Group', name: 'g', namespace: 'ns', uid: 'u1', resourceVersion: '7' });
    expect(body.metadata).toEqual({ generateName: 'g.', namespace: 'ns' });
    expect(body.message).toHaveLength(1024);
    expect(body.firstTimestamp).toBe('2026-11-23T10:00:00Z');
    expect(body.reportingInstance).toBe('op-1');
  });
});
