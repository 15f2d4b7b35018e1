import type { CoreV1Event } from '@kubernetes/client-node';
import { API_VERSION } from '../api/v1alpha1/index.js';
import type { DesiredReady, KubeObject } from './status.js';

/**
 * Kubernetes Events for what a platform engineer wants in `kubectl describe`: Ready turning
 * True or False (or changing its reason) and a key being minted. Messages come from compile
 * errors and name fields and resources, never values.
 */

/** The Event a Ready change deserves, or undefined when only the message or generation moved. */
export function readyEventOf(
  prev: { status?: string; reason?: string } | undefined,
  want: DesiredReady,
): { type: 'Normal' | 'Warning'; reason: string; message: string } | undefined {
  if (prev && prev.status === want.status && prev.reason === want.reason) return undefined;
  // The moment between an ApiKey's creation and its minted Secret is no news: KeyMinted follows.
  if (want.reason === 'KeyPending') return undefined;
  return { type: want.status === 'True' ? 'Normal' : 'Warning', reason: want.reason, message: want.message };
}

export function eventBody(kind: string, o: KubeObject, e: { type: string; reason: string; message: string }, reporter: string, now: Date): CoreV1Event {
  const namespace = o.metadata.namespace ?? 'default';
  const time = now.toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    metadata: { generateName: `${o.metadata.name}.`, namespace },
    involvedObject: { apiVersion: API_VERSION, kind, name: o.metadata.name, namespace, uid: o.metadata.uid, resourceVersion: o.metadata.resourceVersion },
    type: e.type,
    reason: e.reason,
    // The API server caps messages at 1 KiB.
    message: e.message.length > 1024 ? `${e.message.slice(0, 1021)}...` : e.message,
    source: { component: 'tollgate-operator' },
    reportingComponent: 'tollgate-operator',
    reportingInstance: reporter,
    firstTimestamp: time as unknown as Date,
    lastTimestamp: time as unknown as Date,
    count: 1,
  };
}
