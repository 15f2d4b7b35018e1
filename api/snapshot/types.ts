/**
 * The data-plane config: what a proxy needs and nothing of Kubernetes. Plain JSON so it can be
 * hashed into a version and streamed over gRPC; money is integer micro-credits as strings.
 */
export interface GatewayConfig {
  /** Content hash of everything below. */
  version: string;
  models: Record<string, CompiledModel>;
  groups: Record<string, CompiledGroup>;
  /** Lowercase hex sha256 of the whole key -> key record. Revoked keys are absent. */
  keys: Record<string, CompiledKey>;
}

export type ModelType = 'chat' | 'image' | 'video';
export type ProviderName =
  'openai' | 'anthropic' | 'openai-compatible' | 'replicate' | 'simulator' | 'fal' | 'gemini' | 'ark' | 'vertex' | 'bedrock' | 'azure-openai';

/** Micro-credit amounts, as decimal integer strings. Per million tokens for chat. */
export interface MicroPricing {
  inputPerMillion?: string;
  cachedInputPerMillion?: string;
  outputPerMillion?: string;
  perImage?: Record<string, string>;
  perSecond?: Record<string, string>;
  audioPerSecond?: string;
}

export interface CompiledBackend {
  provider: ProviderName;
  baseURL: string;
  /** Upstream model name. */
  model: string;
  /** Resolved secret value (operator) or an environment variable to read (standalone). */
  credential?: { value: string } | { env: string };
  weight: number;
  priority: number;
  path?: string;
  /** openai-compatible: the operations the server offers and their paths (exactly these are spoken). */
  paths?: Partial<Record<'chat-completions' | 'responses' | 'messages' | 'count-tokens', string>>;
  headers?: Record<string, string>;
  timeoutMs: number;
  region?: string;
  project?: string;
  apiVersion?: string;
}

export interface CompiledModel {
  model: string;
  type: ModelType;
  /** Sorted by priority; the proxy picks by weight within the first priority that is not cooling down. */
  backends: CompiledBackend[];
  capabilities: Record<string, unknown>;
  maxOutputTokens: number;
  labels: Record<string, string>;
  /** "ModelRoute/<namespace>/<name>" for messages. */
  source: string;
}

export interface CompiledGroup {
  name: string;
  /** Model code -> effective prices in this group (multiplier and overrides applied). */
  models: Record<string, MicroPricing>;
  ccOnly: boolean;
  rateLimits: { requestsPerMinute?: number; tokensPerMinute?: number; concurrentRequests?: number };
  disconnectPolicy: 'bill-delivered' | 'drain';
}

export interface CompiledKey {
  /** The ApiKey resource name: what logs and usage records show, never the key. */
  name: string;
  group: string;
  account: string;
  /** Epoch milliseconds; a key past it is rejected even before the next snapshot drops it. */
  expiresAt?: number;
  /** Micro-credits. */
  spendLimit?: string;
}

export interface CompileError {
  kind: string;
  name: string;
  namespace?: string;
  /** Where the resource came from (a file path in standalone mode). */
  source?: string;
  /** Dotted path of the field at fault, e.g. spec.models[2]. */
  field: string;
  message: string;
}

export interface CompileResult {
  config: GatewayConfig;
  errors: CompileError[];
}
