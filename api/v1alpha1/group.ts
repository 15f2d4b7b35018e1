import { z } from 'zod';
import { CommonStatus, Decimal, ObjectMeta } from './common.js';
import { Pricing } from './modelroute.js';

export const RateLimits = z.strictObject({
  requestsPerMinute: z.number().int().min(1).optional(),
  tokensPerMinute: z.number().int().min(1).optional(),
  concurrentRequests: z.number().int().min(1).optional(),
});

export const GroupSpec = z.strictObject({
  models: z.array(z.string().min(1)).optional(),
  modelSelector: z.strictObject({ matchLabels: z.record(z.string(), z.string()) }).optional(),
  priceMultiplier: Decimal.optional(),
  priceOverrides: z.record(z.string(), Pricing).optional(),
  /** true: only the Claude Code client is accepted. */
  ccOnly: z.boolean().optional(),
  rateLimits: RateLimits.optional(),
  /** What a client disconnect mid-stream costs: abort and bill what was delivered, or drain and bill the upstream's final usage. */
  disconnectPolicy: z.enum(['bill-delivered', 'drain']).optional(),
});
export type GroupSpec = z.infer<typeof GroupSpec>;

export const Group = z.strictObject({
  apiVersion: z.literal('tollgate.dev/v1alpha1'),
  kind: z.literal('Group'),
  metadata: ObjectMeta,
  spec: GroupSpec,
  status: CommonStatus.optional(),
});
export type Group = z.infer<typeof Group>;
