import { z } from 'zod';
import { Condition, Decimal, Name, ObjectMeta, cel } from './common.js';

export const Provider = z.enum([
  'openai',
  'anthropic',
  'openai-compatible',
  'replicate',
  'simulator',
  'fal',
  'gemini',
  'ark',
  'vertex',
  'bedrock',
  'azure-openai',
]);
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
  /**
   * openai-compatible: the chat APIs the server offers, each at its path relative to baseURL
   * (many servers also expose an Anthropic-style Messages endpoint or a Responses one). When set,
   * exactly these are spoken: a client speaking one of them is passed through, the others are
   * translated to the first of messages, chatCompletions, responses.
   */
  paths: z
    .strictObject({
      chatCompletions: z.string().startsWith('/').optional(),
      responses: z.string().startsWith('/').optional(),
      messages: z.string().startsWith('/').optional(),
      countTokens: z.string().startsWith('/').optional(),
    })
    .refine((p) => Object.values(p).some((v) => v !== undefined), 'name at least one path')
    .optional(),
  /** Extra headers sent upstream (e.g. a vendor's routing header). Never secrets: use credentials. */
  headers: z.record(z.string(), z.string()).optional(),
  /** bedrock: the AWS region (default: read from the baseURL's host). vertex: the location, with `project`, when the baseURL does not name them. */
  region: z
    .string()
    .regex(/^[a-z0-9-]+$/, 'must be a region name such as us-east-1')
    .optional(),
  /** vertex: the Google Cloud project, when the baseURL does not name it (default: the service account key's project_id). */
  project: z
    .string()
    .regex(/^[a-z0-9-]+$/, 'must be a project id')
    .optional(),
  /** azure-openai: the api-version query parameter of deployment paths (default 2024-10-21, Responses 2025-04-01-preview). */
  apiVersion: z.string().min(1).optional(),
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
  })
  .meta(
    cel({
      rule: '!has(self.minDuration) || !has(self.maxDuration) || self.minDuration <= self.maxDuration',
      message: 'minDuration must not exceed maxDuration',
    }),
  );
export type Capabilities = z.infer<typeof Capabilities>;

export const ModelRouteSpec = z
  .strictObject({
    model: z.string().min(1).max(200).optional(),
    type: z.enum(['chat', 'image', 'video']),
    backends: z.array(Backend).min(1),
    pricing: Pricing.optional(),
    capabilities: Capabilities.optional(),
    /** Chat: the output cap used to size a hold when the request sets no max_tokens (default 4096). */
    maxOutputTokens: z.number().int().min(1).optional(),
  })
  .meta(
    // In a cluster a chat route without token prices is refused: a missing price would serve the
    // model for nothing. (Files stay lenient: there a missing price is 0.)
    cel({
      rule: "self.type != 'chat' || (has(self.pricing) && has(self.pricing.inputPerMillion) && has(self.pricing.outputPerMillion))",
      message: 'a chat route needs pricing.inputPerMillion and pricing.outputPerMillion ("0" for a free model)',
      fieldPath: '.pricing',
      reason: 'FieldValueRequired',
    }),
  );
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
