import { z } from 'zod';
import { Condition, Decimal, Name, ObjectMeta } from './common.js';

export const Provider = z.enum(['openai', 'anthropic', 'openai-compatible', 'replicate', 'simulator']);
export type Provider = z.infer<typeof Provider>;

export const Credentials = z.union([
  z.strictObject({ secretRef: z.strictObject({ name: Name, key: z.string().min(1) }) }),
  z.strictObject({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name') }),
]);
export type Credentials = z.infer<typeof Credentials>;

export const Backend = z.strictObject({
  provider: Provider,
  /** As the provider's official SDK takes it, e.g. https://api.openai.com/v1. */
  baseURL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
  /** Upstream model name; defaults to spec.model. */
  model: z.string().min(1).optional(),
  credentials: Credentials.optional(),
  weight: z.number().int().min(0).max(1000).optional(),
  priority: z.number().int().min(0).max(100).optional(),
  /** openai-compatible: the chat completions path relative to baseURL (default /chat/completions). */
  path: z.string().startsWith('/').optional(),
  /** Extra headers sent upstream (e.g. a vendor's routing header). Never secrets: use credentials. */
  headers: z.record(z.string(), z.string()).optional(),
  /** Upper bound for one upstream call, first byte to last (default 600). */
  timeoutSeconds: z.number().int().min(1).max(3600).optional(),
});
export type Backend = z.infer<typeof Backend>;

export const Pricing = z.strictObject({
  inputPerMillion: Decimal.optional(),
  cachedInputPerMillion: Decimal.optional(),
  outputPerMillion: Decimal.optional(),
  perImage: z.record(z.string(), Decimal).optional(),
  perSecond: z.record(z.string(), Decimal).optional(),
  audioPerSecond: Decimal.optional(),
});
export type Pricing = z.infer<typeof Pricing>;

export const Capabilities = z
  .strictObject({
    // image
    inpaint: z.boolean().optional(),
    qualities: z.array(z.string()).optional(),
    // video
    firstFrame: z.boolean().optional(),
    lastFrame: z.boolean().optional(),
    referenceImages: z.boolean().optional(),
    referenceVideo: z.boolean().optional(),
    audio: z.boolean().optional(),
    resolutions: z.array(z.string()).optional(),
    minDuration: z.number().int().min(1).optional(),
    maxDuration: z.number().int().min(1).optional(),
    // chat
    countTokens: z.boolean().optional(),
  })
  .refine((c) => c.minDuration === undefined || c.maxDuration === undefined || c.minDuration <= c.maxDuration, {
    message: 'minDuration must not exceed maxDuration',
    path: ['minDuration'],
  });
export type Capabilities = z.infer<typeof Capabilities>;

export const ModelRouteSpec = z.strictObject({
  model: z.string().min(1).max(200).optional(),
  type: z.enum(['chat', 'image', 'video']),
  backends: z.array(Backend).min(1),
  pricing: Pricing.optional(),
  capabilities: Capabilities.optional(),
  /** Chat: the output cap used to size a hold when the request sets no max_tokens (default 4096). */
  maxOutputTokens: z.number().int().min(1).optional(),
});
export type ModelRouteSpec = z.infer<typeof ModelRouteSpec>;

export const ModelRouteStatus = z.strictObject({
  /** The model code clients use (spec.model, else metadata.name), written by the operator for the MODEL column. */
  model: z.string().optional(),
  observedGeneration: z.number().int().optional(),
  conditions: z.array(Condition).optional(),
});

export const ModelRoute = z.strictObject({
  apiVersion: z.literal('tollgate.dev/v1alpha1'),
  kind: z.literal('ModelRoute'),
  metadata: ObjectMeta,
  spec: ModelRouteSpec,
  status: ModelRouteStatus.optional(),
});
export type ModelRoute = z.infer<typeof ModelRoute>;
