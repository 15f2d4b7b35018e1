import { z } from 'zod';
import { CommonStatus, Decimal, MAX_GROUP_MODELS, ObjectMeta, cel } from './common.js';
import { Pricing } from './modelroute.js';

export const RateLimits = z.strictObject({
  requestsPerMinute: z.number().int().min(1).optional(),
  tokensPerMinute: z.number().int().min(1).optional(),
  concurrentRequests: z.number().int().min(1).optional(),
});

export const GroupSpec = z
  .strictObject({
    models: z.array(z.string().min(1).max(200)).max(MAX_GROUP_MODELS).optional(),
    modelSelector: z.strictObject({ matchLabels: z.record(z.string(), z.string()) }).optional(),
    priceMultiplier: Decimal.optional(),
    priceOverrides: z
      .record(z.string(), Pricing)
      .refine((r) => Object.keys(r).length <= MAX_GROUP_MODELS, `at most ${MAX_GROUP_MODELS} price overrides`)
      .meta({ maxProperties: MAX_GROUP_MODELS })
      .optional(),
    /** true: only the Claude Code client is accepted. */
    ccOnly: z.boolean().optional(),
    rateLimits: RateLimits.optional(),
    /** What a client disconnect mid-stream costs: abort and bill what was delivered, or drain and bill the upstream's final usage. */
    disconnectPolicy: z.enum(['bill-delivered', 'drain']).optional(),
  })
  .refine((g) => g.models !== undefined || g.modelSelector !== undefined, 'name the models (models) or select them by label (modelSelector)')
  .meta(
    cel(
      {
        rule: 'has(self.models) || has(self.modelSelector)',
        message: 'name the models (models) or select them by label (modelSelector)',
        reason: 'FieldValueRequired',
      },
      {
        // With a modelSelector the group's models are known only when compiled (Ready says so).
        rule: '!has(self.priceOverrides) || has(self.modelSelector) || (has(self.models) && self.priceOverrides.all(m, m in self.models))',
        message: 'every key of priceOverrides must be one of models',
        fieldPath: '.priceOverrides',
      },
    ),
  );
export type GroupSpec = z.infer<typeof GroupSpec>;

export const Group = z.strictObject({
  apiVersion: z.literal('tollgate.dev/v1alpha1'),
  kind: z.literal('Group'),
  metadata: ObjectMeta,
  spec: GroupSpec,
  status: CommonStatus.optional(),
});
export type Group = z.infer<typeof Group>;
