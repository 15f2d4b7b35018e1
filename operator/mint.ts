import { randomBytes } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { API_VERSION, KEY_PREFIX } from '../api/v1alpha1/index.js';
import type { KubeObject } from './status.js';

/**
 * The label on every minted-key Secret (value: its ApiKey's name). The operator's one Secret
 * informer by selector selects on it; other Secrets it reads are watched by name.
 */
export const MINTED_LABEL = 'tollgate.dev/apikey';

/** The data key of a minted-key Secret. */
export const SECRET_DATA_KEY = 'apiKey';

/** sk-service- + base64url of 32 random bytes. */
export function mintApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** The Secret an ApiKey's minted key lives in. */
export function mintedSecretName(apiKeyName: string): string {
  return `${apiKeyName}-key`;
}

/** Whether a Secret belongs to this ApiKey (by uid: a re-created ApiKey of the same name does not own it). */
export function ownedBy(o: KubeObject, owner: KubeObject): boolean {
  return (o.metadata.ownerReferences ?? []).some((r) => r.uid === owner.metadata.uid && r.kind === 'ApiKey');
}

/**
 * The Secret holding a newly minted key. The ownerReference makes the API server delete it with
 * its ApiKey; blockOwnerDeletion keeps a foreground deletion of the ApiKey waiting for it.
 */
export function mintedSecret(apiKey: KubeObject, namespace: string, key: string): V1Secret {
  const name = apiKey.metadata.name;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: mintedSecretName(name),
      namespace,
      labels: { 'app.kubernetes.io/managed-by': 'tollgate-operator', [MINTED_LABEL]: name },
      ownerReferences: [{ apiVersion: API_VERSION, kind: 'ApiKey', name, uid: apiKey.metadata.uid!, controller: true, blockOwnerDeletion: true }],
    },
    type: 'Opaque',
    data: { [SECRET_DATA_KEY]: Buffer.from(key).toString('base64') },
  };
}
