import { z } from 'zod';
import { Condition, Decimal, Name, ObjectMeta, cel } from './common.js';

export const KEY_PREFIX = 'sk-service-';

export const ApiKeySpec = z.strictObject({
  group: Name,
  account: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_.:-]+$/, 'must be letters, digits, _ . : or -')
    // Credits already spent through the key stay with the account they came from.
    .meta(cel({ rule: 'self == oldSelf', message: 'account is immutable: make a new ApiKey for another account' })),
  /** sha256 of the whole key; absent in a cluster, where the operator mints the key. */
  keyHash: z
    .string()
    .regex(/^sha256:[0-9a-f]{64}$/, 'must be sha256:<64 lowercase hex>')
    .optional(),
  revoked: z.boolean().optional(),
  expiresAt: z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' }).optional(),
  spendLimit: Decimal.optional(),
});
export type ApiKeySpec = z.infer<typeof ApiKeySpec>;

export const ApiKeyStatus = z.strictObject({
  secretName: z.string().optional(),
  observedGeneration: z.number().int().optional(),
  conditions: z.array(Condition).optional(),
});

export const ApiKey = z.strictObject({
  apiVersion: z.literal('tollgate.dev/v1alpha1'),
  kind: z.literal('ApiKey'),
  metadata: ObjectMeta,
  spec: ApiKeySpec,
  status: ApiKeyStatus.optional(),
});
export type ApiKey = z.infer<typeof ApiKey>;
