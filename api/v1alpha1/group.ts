import { z } from 'zod';
import { CommonStatus, Decimal, MAX_GROUP_MODELS, ObjectMeta, cel } from './common.js';
import { Pricing } from './modelroute.js';

export const RateLimits = z
  .strictObject({
    requestsPerMinute: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Requests per key in a one-minute window (shared by all replicas through Redis when REDIS_URL is set).'),
    tokensPerMinute: z.number().int().min(1).optional().describe('Tokens per key in a one-minute window (shared as requestsPerMinute is).'),
    concurrentRequests: z.number().int().min(1).optional().describe('Requests of one key in flight at once, per replica.'),
  })
  .describe('Limits per key of the group, on POST endpoints; a refused request gets 429 with retry-after. Absent: no limit.');

export const GroupSpec = z
  .strictObject({
    models: z
      .array(z.string().min(1).max(200))
      .max(MAX_GROUP_MODELS)
      .optional()
      .describe("The model codes (ModelRoutes' spec.model or name) the group's keys may call; with modelSelector, both count."),
    modelSelector: z
      .strictObject({
        matchLabels: z.record(z.string(), z.string()).describe('Labels a ModelRoute must all carry to be in the group.'),
      })
      .optional()
      .describe('Selects ModelRoutes by their labels, as a Kubernetes label selector does.'),
    priceMultiplier: Decimal.optional().describe(
      'Every price of the group\'s models times this (default "1"), rounded to the micro-credit; overridden fields are not multiplied.',
    ),
    priceOverrides: z
      .record(z.string(), Pricing)
      .refine((r) => Object.keys(r).length <= MAX_GROUP_MODELS, `at most ${MAX_GROUP_MODELS} price overrides`)
      .meta({ maxProperties: MAX_GROUP_MODELS })
      .optional()
      .describe("Per model code of the group: price fields that replace the ModelRoute's for this group's keys."),
    ccOnly: z.boolean().optional().describe("true: only the Claude Code client is accepted with the group's keys (default false)."),
    rateLimits: RateLimits.optional(),
    disconnectPolicy: z
      .enum(['bill-delivered', 'drain'])
      .optional()
      .describe(
        'What a client that disconnects mid-stream costs: bill-delivered (default) aborts the upstream and bills what was delivered; ' +
          'drain lets the upstream finish and bills its final usage.',
      ),
  })
  .refine((g) => g.models !== undefined || g.modelSelector !== undefined, 'name the models (models) or select them by label (modelSelector)')
  .meta({
    description: 'The models a set of API keys may call, at what prices and limits.',
    ...cel(
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
