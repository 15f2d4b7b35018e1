import { z } from 'zod';

export const GROUP = 'tollgate.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Credits as a decimal string with at most 6 places: money never passes through a float. */
export const Decimal = z.string().regex(/^\d{1,12}(\.\d{1,6})?$/, 'must be a decimal string such as "0.50" (at most 6 places)');

export const Name = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a DNS-1123 name (lowercase letters, digits, - and .)');

/** Kubernetes adds many metadata fields; we read a few and keep the rest untouched. */
export const ObjectMeta = z.looseObject({
  name: Name,
  namespace: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  generation: z.number().int().optional(),
  resourceVersion: z.string().optional(),
  uid: z.string().optional(),
});
export type ObjectMeta = z.infer<typeof ObjectMeta>;

export const Condition = z.strictObject({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string(),
  message: z.string(),
  observedGeneration: z.number().int().optional(),
  lastTransitionTime: z.string().optional(),
});
export type Condition = z.infer<typeof Condition>;

export const CommonStatus = z.strictObject({
  observedGeneration: z.number().int().optional(),
  conditions: z.array(Condition).optional(),
});
