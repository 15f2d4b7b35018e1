import { Gauge, Histogram, type Registry } from 'prom-client';
import { KeyedCounter } from './counter.js';
import { KeyedHistogram } from './histogram.js';

/**
 * The OpenTelemetry GenAI metrics (semantic conventions 1.37, in Prometheus form: dots become
 * underscores, seconds get the unit suffix) and the gateway's own per-request metrics. Every
 * label value comes from the config in service (model codes, group names, backend endpoints,
 * provider names) or from a closed list (protocols, outcomes, error codes, status classes):
 * never a key, a key name, a prompt, a request id or anything else a client chooses.
 */
export const GENAI_LABELS = ['gen_ai_operation_name', 'gen_ai_request_model', 'gen_ai_provider_name', 'group', 'backend', 'protocol'] as const;

/** How a request ended: the outcome label of tollgate_requests_total. */
export type Outcome = 'ok' | 'cancelled' | 'upstream_error' | 'refused' | 'failed';

/** What an upstream call ended with: its HTTP status class, or why it has none. */
export type StatusClass = '2xx' | '3xx' | '4xx' | '429' | '5xx' | 'timeout' | 'unavailable' | 'aborted';

export interface GenAiMetrics {
  tokens: KeyedHistogram<readonly [...typeof GENAI_LABELS, 'gen_ai_token_type']>;
  ttft: KeyedHistogram<typeof GENAI_LABELS>;
  perOutputToken: KeyedHistogram<typeof GENAI_LABELS>;
  duration: KeyedHistogram<typeof GENAI_LABELS>;
  creditsCharged: KeyedCounter<readonly ['model', 'group', 'kind']>;
  creditsRefunded: KeyedCounter<readonly ['model', 'group', 'kind']>;
  requests: KeyedCounter<readonly ['route', 'model', 'group', 'outcome', 'reason']>;
  upstreamDuration: KeyedHistogram<readonly ['backend', 'gen_ai_provider_name', 'status_class']>;
  upstreamRequests: KeyedCounter<readonly ['backend', 'gen_ai_provider_name', 'status_class']>;
  failovers: KeyedCounter<readonly ['model', 'backend']>;
  taskDuration: Histogram<'kind' | 'status'>;
}

// The OpenTelemetry GenAI conventions' advised bucket boundaries.
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304];
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
const TPOT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const UPSTREAM_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const TASK_BUCKETS = [1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

export function genAiMetrics(registry: Registry): GenAiMetrics {
  const registers = [registry];
  return {
    tokens: new KeyedHistogram(registry, {
      name: 'gen_ai_client_token_usage',
      help: 'Tokens used per chat request, by token type (input, output); input includes cached input',
      labelNames: [...GENAI_LABELS, 'gen_ai_token_type'] as const,
      buckets: TOKEN_BUCKETS,
    }),
    ttft: new KeyedHistogram(registry, {
      name: 'gen_ai_server_time_to_first_token_seconds',
      help: "Time from the request's arrival to the first streamed byte sent to the client",
      labelNames: GENAI_LABELS,
      buckets: TTFT_BUCKETS,
    }),
    perOutputToken: new KeyedHistogram(registry, {
      name: 'gen_ai_server_time_per_output_token_seconds',
      help: 'Streamed requests: time after the first token divided by the output tokens after the first',
      labelNames: GENAI_LABELS,
      buckets: TPOT_BUCKETS,
    }),
    duration: new KeyedHistogram(registry, {
      name: 'gen_ai_server_request_duration_seconds',
      help: 'Chat requests that reached an upstream: time from arrival to settlement',
      labelNames: GENAI_LABELS,
      buckets: DURATION_BUCKETS,
    }),
    creditsCharged: new KeyedCounter(registry, {
      name: 'tollgate_credits_charged_total',
      help: 'Credits charged, by model, group and kind (chat, image, video)',
      labelNames: ['model', 'group', 'kind'] as const,
    }),
    creditsRefunded: new KeyedCounter(registry, {
      name: 'tollgate_credits_refunded_total',
      help: 'Credits refunded (tasks that failed or were cancelled), by model, group and kind',
      labelNames: ['model', 'group', 'kind'] as const,
    }),
    requests: new KeyedCounter(registry, {
      name: 'tollgate_requests_total',
      help: 'API requests by route, model, group and outcome (ok, cancelled, upstream_error, refused, failed); reason: the error code of a refusal or failure',
      labelNames: ['route', 'model', 'group', 'outcome', 'reason'] as const,
    }),
    upstreamDuration: new KeyedHistogram(registry, {
      name: 'tollgate_upstream_request_duration_seconds',
      help: "Upstream calls of chat requests: time to the upstream's response head (or its failure), by backend and status class",
      labelNames: ['backend', 'gen_ai_provider_name', 'status_class'] as const,
      buckets: UPSTREAM_BUCKETS,
    }),
    upstreamRequests: new KeyedCounter(registry, {
      name: 'tollgate_upstream_requests_total',
      help: 'Upstream calls of chat requests by backend and status class (2xx, 4xx, 429, 5xx, timeout, unavailable, aborted)',
      labelNames: ['backend', 'gen_ai_provider_name', 'status_class'] as const,
    }),
    failovers: new KeyedCounter(registry, {
      name: 'tollgate_failovers_total',
      help: 'Chat requests moved to another backend, by model and the backend that failed',
      labelNames: ['model', 'backend'] as const,
    }),
    taskDuration: new Histogram({
      name: 'tollgate_task_duration_seconds',
      help: 'Tasks from submission to their terminal state, by kind and status',
      labelNames: ['kind', 'status'] as const,
      buckets: TASK_BUCKETS,
      registers,
    }),
  };
}

/** One backend of a model in the config in service. */
export interface BackendState {
  model: string;
  baseURL: string;
  provider: string;
  cooling: boolean;
}

/**
 * Cooldown gauges, computed from the config and the cooldowns at each scrape: the backends of a
 * model that left the config leave the gauges with it.
 */
export function backendGauges(registry: Registry, read: () => BackendState[]): void {
  const registers = [registry];
  new Gauge({
    name: 'tollgate_backend_cooling_down',
    help: 'Whether a backend of a model is cooling down after failures (1) or ready (0)',
    labelNames: ['model', 'backend', 'gen_ai_provider_name'] as const,
    registers,
    collect() {
      this.reset();
      const seen = new Map<string, { labels: Record<'model' | 'backend' | 'gen_ai_provider_name', string>; cooling: boolean }>();
      for (const b of read()) {
        const labels = { model: b.model, backend: backendLabel(b.baseURL), gen_ai_provider_name: b.provider };
        const id = `${labels.model}\0${labels.backend}\0${labels.gen_ai_provider_name}`;
        // Two backends of one model at one endpoint (two upstream models): cooling if either is.
        seen.set(id, { labels, cooling: b.cooling || (seen.get(id)?.cooling ?? false) });
      }
      for (const { labels, cooling } of seen.values()) this.set(labels, cooling ? 1 : 0);
    },
  });
  new Gauge({
    name: 'tollgate_model_backends',
    help: 'Backends of each model in the config in service',
    labelNames: ['model'] as const,
    registers,
    collect() {
      this.reset();
      for (const [model, n] of count(read(), () => true)) this.set({ model }, n);
    },
  });
  new Gauge({
    name: 'tollgate_model_backends_cooling_down',
    help: 'Backends of each model cooling down after failures (equal to tollgate_model_backends: none is ready)',
    labelNames: ['model'] as const,
    registers,
    collect() {
      this.reset();
      for (const [model, n] of count(read(), (b) => b.cooling)) this.set({ model }, n);
    },
  });
}

function count(states: BackendState[], pred: (b: BackendState) => boolean): Map<string, number> {
  const out = new Map<string, number>();
  for (const b of states) out.set(b.model, (out.get(b.model) ?? 0) + (pred(b) ? 1 : 0));
  return out;
}

/** A backend's label: its endpoint (host and base path), which the config names; never a credential. */
export function backendLabel(baseURL: string): string {
  let label = labels.get(baseURL);
  if (label === undefined) {
    try {
      const u = new URL(baseURL);
      label = (u.host + u.pathname).replace(/\/+$/, '');
    } catch {
      label = 'invalid';
    }
    // Bounded by the configs seen: a baseURL is config, never a client's input.
    if (labels.size > 10_000) labels.clear();
    labels.set(baseURL, label);
  }
  return label;
}
const labels = new Map<string, string>();

export function statusClass(status: number): StatusClass {
  if (status === 429) return '429';
  if (status >= 500) return '5xx';
  if (status >= 400) return '4xx';
  if (status >= 300) return '3xx';
  return '2xx';
}

/** Output tokens after the first, over the time after the first: undefined when it cannot be told. */
export function timePerOutputToken(latencyMs: number, ttftMs: number | undefined, outputTokens: number): number | undefined {
  if (ttftMs === undefined || outputTokens < 2 || latencyMs < ttftMs) return undefined;
  return (latencyMs - ttftMs) / 1000 / (outputTokens - 1);
}
