import { z } from 'zod';
import { Decimal, Name, ObjectMeta, cel, statusWith } from './common.js';

export const Provider = z
  .enum(['openai', 'anthropic', 'openai-compatible', 'replicate', 'simulator', 'fal', 'gemini', 'ark', 'vertex', 'bedrock', 'azure-openai'])
  .describe(
    'The upstream wire protocol. Chat: openai (Chat Completions and Responses), anthropic (Messages), ' +
      'openai-compatible (a server speaking the OpenAI API; `path`/`paths` say which chat APIs), gemini (Gemini API), ' +
      'vertex (Vertex AI: Gemini or Claude by the model), bedrock (Bedrock Converse, SigV4), azure-openai (Azure OpenAI deployments). ' +
      'Images and videos: openai, replicate (predictions), fal (fal.ai queue), gemini (Gemini images and Veo), ark (ByteDance ModelArk). ' +
      'simulator: reserved; no adapter speaks it, so such a backend is never called (point an openai or anthropic backend at `tollgate simulate`). ' +
      'Any chat model answers on all three client endpoints: a protocol the backend does not speak is translated.',
  );
export type Provider = z.infer<typeof Provider>;

export const Credentials = z
  .union([
    z.strictObject({
      secretRef: z
        .strictObject({
          name: Name.describe("The Secret's name, in the ModelRoute's namespace."),
          key: z.string().min(1).describe('The key in the Secret whose value is the credential.'),
        })
        .describe('In a cluster: a Secret the operator reads and sends to the proxies (never logged, never in a status).'),
    }),
    z.strictObject({
      env: z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
        .describe("Outside a cluster: the name of an environment variable of the gateway's process that holds the credential."),
    }),
  ])
  .describe(
    'The upstream credential: an API key (sent as the provider expects it), a Vertex service account key (JSON) or access token, ' +
      'or Bedrock keys. Exactly one of secretRef or env. Absent: nothing is sent (a server without authentication).',
  );
export type Credentials = z.infer<typeof Credentials>;

export const Backend = z.strictObject({
  provider: Provider,
  baseURL: z
    .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
    .describe("The upstream's address as the provider's official SDK takes it, e.g. https://api.openai.com/v1."),
  model: z.string().min(1).optional().describe("The upstream's model name (for Azure, the deployment); default: spec.model."),
  credentials: Credentials.optional(),
  weight: z
    .number()
    .int()
    .min(0)
    .max(1000)
    .optional()
    .describe('Share of requests among backends of the same priority (default 1); a weight of 0 is tried only after the others of its priority.'),
  priority: z
    .number()
    .int()
    .min(0)
    .max(100)
    .optional()
    .describe('Lower is tried first (default 0); a failed backend cools down for a few seconds and the next one is tried.'),
  path: z.string().startsWith('/').optional().describe('openai-compatible: the Chat Completions path under baseURL (default /chat/completions).'),
  paths: z
    .strictObject({
      chatCompletions: z.string().startsWith('/').optional().describe('The Chat Completions path under baseURL.'),
      responses: z.string().startsWith('/').optional().describe('The Responses path under baseURL.'),
      messages: z.string().startsWith('/').optional().describe('The Anthropic-style Messages path under baseURL.'),
      countTokens: z.string().startsWith('/').optional().describe('The Messages count_tokens path under baseURL.'),
    })
    .refine((p) => Object.values(p).some((v) => v !== undefined), 'name at least one path')
    .optional()
    .describe(
      'openai-compatible: exactly the chat APIs the server offers, each at its path under baseURL. A client speaking one of ' +
        'them is passed through; the others are translated to the first of messages, chatCompletions, responses.',
    ),
  headers: z
    .record(z.string(), z.string())
    .optional()
    .describe("Extra headers sent upstream (e.g. a vendor's routing header). Never secrets: use credentials."),
  region: z
    .string()
    .regex(/^[a-z0-9-]+$/, 'must be a region name such as us-east-1')
    .optional()
    .describe("bedrock: the AWS region (default: read from the baseURL's host). vertex: the location, with project, when the baseURL does not name them."),
  project: z
    .string()
    .regex(/^[a-z0-9-]+$/, 'must be a project id')
    .optional()
    .describe("vertex: the Google Cloud project, when the baseURL does not name it (default: the service account key's project_id)."),
  apiVersion: z
    .string()
    .min(1)
    .optional()
    .describe('azure-openai: the api-version query parameter of deployment paths (default 2024-10-21; Responses 2025-04-01-preview).'),
  timeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(3600)
    .optional()
    .describe(
      "Seconds to wait for the upstream's response headers, and at most between two chunks of its body (default 600); a stream that keeps sending is never cut.",
    ),
});
export type Backend = z.infer<typeof Backend>;

export const Pricing = z
  .strictObject({
    inputPerMillion: Decimal.optional().describe('Chat: credits per million input tokens.'),
    cachedInputPerMillion: Decimal.optional().describe('Chat: credits per million input tokens read from a prompt cache (default: inputPerMillion).'),
    outputPerMillion: Decimal.optional().describe('Chat: credits per million output tokens (reasoning tokens included).'),
    perImage: z
      .record(z.string(), Decimal)
      .optional()
      .describe(
        'Images: credits per image by tier ("1K", "2K", "4K") or tier and quality ("2K:high"); the most specific key wins. ' +
          'With a table, a tier it does not list is not offered; without one, images are free.',
      ),
    perSecond: z
      .record(z.string(), Decimal)
      .optional()
      .describe(
        'Videos: credits per second of delivered video by resolution ("480p", "720p", "1080p"); the resolutions priced are those offered unless capabilities.resolutions says.',
      ),
    audioPerSecond: Decimal.optional().describe('Videos: credits per second added when the video is generated with audio.'),
  })
  .describe('Prices in credits, as decimal strings with at most 6 places ("0.50"); a group may multiply or override them.');
export type Pricing = z.infer<typeof Pricing>;

export const Capabilities = z
  .strictObject({
    inpaint: z.boolean().optional().describe('Images: the model takes a mask (inpainting); without it such a request is a 400.'),
    qualities: z
      .array(z.string())
      .optional()
      .describe('Images: the quality tiers a request may ask for ("low", "medium", "high"); without them a request naming a quality is a 400.'),
    firstFrame: z.boolean().optional().describe('Videos: the model takes a first-frame image; otherwise that input is listed as ignored.'),
    lastFrame: z.boolean().optional().describe('Videos: the model takes a last-frame image; otherwise that input is listed as ignored.'),
    referenceImages: z.boolean().optional().describe('Videos: the model takes reference images; otherwise they are listed as ignored.'),
    referenceVideo: z.boolean().optional().describe('Videos: the model takes a reference video; otherwise it is listed as ignored.'),
    audio: z.boolean().optional().describe('Videos: the model generates audio (charged by pricing.audioPerSecond unless the client turns it off).'),
    resolutions: z
      .array(z.string())
      .optional()
      .describe('Videos: the resolutions offered (default: those pricing.perSecond lists, else any); 720p when a request names none and it is offered.'),
    minDuration: z.number().int().min(1).optional().describe('Videos: the shortest duration offered, in seconds (default and floor 4).'),
    maxDuration: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Videos: the longest duration offered, in seconds (default 600); a duration outside the range is a 404.'),
    countTokens: z
      .boolean()
      .optional()
      .describe("Chat: false stops forwarding count_tokens to the backend; the gateway counts with the model family's tokenizer or estimates."),
  })
  .refine((c) => c.minDuration === undefined || c.maxDuration === undefined || c.minDuration <= c.maxDuration, {
    message: 'minDuration must not exceed maxDuration',
    path: ['minDuration'],
  })
  .meta({
    description: "What the model takes beyond a prompt; inputs it does not take are dropped and listed in the task's ignored.",
    ...cel({
      rule: '!has(self.minDuration) || !has(self.maxDuration) || self.minDuration <= self.maxDuration',
      message: 'minDuration must not exceed maxDuration',
    }),
  });
export type Capabilities = z.infer<typeof Capabilities>;

export const ModelRouteSpec = z
  .strictObject({
    model: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("The model code clients send in their requests' model field (default: metadata.name); unique among ModelRoutes."),
    type: z.enum(['chat', 'image', 'video']).describe('chat (the three chat APIs), image (/v1/images/*) or video (/v1/videos) tasks.'),
    backends: z
      .array(Backend)
      .min(1)
      .describe(
        'The upstreams serving the model, one or more: tried by priority (lower first), by weight within a priority; the next one is tried when one fails before answering.',
      ),
    pricing: Pricing.optional(),
    capabilities: Capabilities.optional(),
    maxOutputTokens: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe("Chat: the output tokens a request's credit hold is sized for when it sets no max_tokens (default 4096)."),
  })
  .meta({
    description: 'One model clients can call, and the upstreams and prices behind it.',
    // In a cluster a chat route without token prices is refused: a missing price would serve the
    // model for nothing. (Files stay lenient: there a missing price is 0.)
    ...cel({
      rule: "self.type != 'chat' || (has(self.pricing) && has(self.pricing.inputPerMillion) && has(self.pricing.outputPerMillion))",
      message: 'a chat route needs pricing.inputPerMillion and pricing.outputPerMillion ("0" for a free model)',
      fieldPath: '.pricing',
      reason: 'FieldValueRequired',
    }),
  });
export type ModelRouteSpec = z.infer<typeof ModelRouteSpec>;

export const ModelRouteStatus = statusWith({
  model: z.string().optional().describe('The model code clients use (spec.model, else metadata.name), for the MODEL column.'),
});

export const ModelRoute = z.strictObject({
  apiVersion: z.literal('tollgate.dev/v1alpha1'),
  kind: z.literal('ModelRoute'),
  metadata: ObjectMeta,
  spec: ModelRouteSpec,
  status: ModelRouteStatus.optional(),
});
export type ModelRoute = z.infer<typeof ModelRoute>;
