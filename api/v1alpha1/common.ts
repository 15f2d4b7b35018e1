import { z } from 'zod';

export const GROUP = 'tollgate.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/**
 * Rules the API server checks at admission, written into the generated CRD as the schema node's
 * `x-kubernetes-validations` (CEL; `self` is the node's value, `oldSelf` its stored value on an
 * update). Attach with `.meta(cel(...))` beside the field they guard. A rule that iterates a
 * list or map needs that collection bounded (maxItems / maxProperties): the API server refuses
 * a CRD whose rules' estimated cost is unbounded.
 */
export interface CelRule {
  rule: string;
  message: string;
  /** Where the error points, relative to the node (".pricing"). */
  fieldPath?: string;
  reason?: 'FieldValueInvalid' | 'FieldValueRequired' | 'FieldValueForbidden' | 'FieldValueDuplicate';
}
export const cel = (...rules: CelRule[]) => ({ 'x-kubernetes-validations': rules });

/** Upper bound of a Group's models and price overrides: keeps their CEL rules' cost bounded. */
export const MAX_GROUP_MODELS = 1000;

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

export const Condition = z
  .strictObject({
    type: z.string().describe('The condition: Ready (the resource compiled into the configuration the proxies serve).'),
    status: z.enum(['True', 'False', 'Unknown']).describe('True, False or Unknown.'),
    reason: z
      .string()
      .describe('Why, in one CamelCase word (Compiled, InvalidSpec, ModelNotFound, KeyPending, Revoked, Expired, ...); shown by `kubectl get -o wide`.'),
    message: z.string().describe('Why, for a person; for a resource that does not compile, its errors, each naming the field at fault.'),
    observedGeneration: z.number().int().optional().describe('The metadata.generation this condition was computed from.'),
    lastTransitionTime: z.string().optional().describe('When status last changed (RFC 3339).'),
  })
  .describe('One condition of the resource, written by the operator.');
export type Condition = z.infer<typeof Condition>;

/** The status fields every kind has; a kind with more extends it with statusWith(). */
export const CommonStatus = z
  .strictObject({
    observedGeneration: z.number().int().optional().describe('The metadata.generation the operator last reconciled.'),
    conditions: z.array(Condition).optional().describe('The Ready condition: whether the resource compiled, and if not, why.'),
  })
  .describe('Written by the operator; not set by users.');

/** CommonStatus with a kind's own fields (zod's extend drops the description: it is set again). */
export function statusWith<T extends z.core.$ZodLooseShape>(fields: T) {
  return CommonStatus.extend(fields).describe(CommonStatus.description!);
}
