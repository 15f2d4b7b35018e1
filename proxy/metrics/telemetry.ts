import type { Registry } from 'prom-client';
import type { Logger } from '../../kernel/log.js';
import { accessLine, requestOutcome, type Finished } from './access.js';
import {
  backendGauges,
  backendLabel,
  genAiMetrics,
  type BackendState,
  statusClass,
  timePerOutputToken,
  type GenAiLabels,
  type GenAiMetrics,
  type StatusClass,
} from './genai.js';
import { scopes, type RequestScope, type SettledChat } from './scope.js';

export type { BackendState, RequestScope, SettledChat };

/** A backend as telemetry sees it (structurally the snapshot's CompiledBackend). */
export interface BackendRef {
  provider: string;
  baseURL: string;
}

export interface UpstreamProbe {
  /** The upstream answered with this status (its head arrived). */
  answered(status: number): void;
  /** The call failed before an answer: timeout, unavailable or aborted. */
  failed(kind: 'timeout' | 'unavailable' | 'aborted'): void;
}

const NO_PROBE: UpstreamProbe = { answered: () => {}, failed: () => {} };

/**
 * One gateway's request telemetry: GenAI metrics and the access log. The request path reports
 * into the scope of the request it runs in (begin() -> run()), so upstream calls and billing
 * need no handle passed down to them.
 */
export class Telemetry {
  readonly metrics: GenAiMetrics;

  constructor(
    registry: Registry,
    private readonly log: Logger,
    /** The backends of the config in service and whether each is cooling down, read at each scrape. */
    backends: () => BackendState[] = () => [],
  ) {
    this.metrics = genAiMetrics(registry);
    backendGauges(registry, backends);
  }

  begin(requestId: string): RequestScope {
    return { telemetry: this, requestId, attempts: 0 };
  }

  run<T>(scope: RequestScope, fn: () => T): T {
    return scopes.run(scope, fn);
  }

  /** The request's end: its outcome counted, its access-log line written. */
  end(scope: RequestScope, f: Finished): void {
    const { outcome, reason } = requestOutcome(f, scope.settled?.status);
    const model = scope.chat?.model ?? '';
    const group = scope.chat?.group ?? f.group ?? '';
    this.metrics.requests.inc({ route: f.route, model, group, outcome, reason });
    const line = accessLine(scope, f, outcome, reason);
    if (f.status >= 500) this.log.warn('request', line);
    else this.log.info('request', line);
  }
}

/** The scope of the request running now, if any (background work has none). */
export function currentScope(): RequestScope | undefined {
  return scopes.getStore();
}

/** Credits are held for a chat request: from here on its metrics carry its model, group and protocol. */
export function chatHeld(model: string, group: string, protocol: string): RequestScope | undefined {
  const s = scopes.getStore();
  if (s) s.chat = { model, group, protocol };
  return s;
}

/** An upstream call of the current request starts; the probe is told how it ended. */
export function watchUpstream(backend: BackendRef): UpstreamProbe {
  const s = scopes.getStore();
  if (!s) return NO_PROBE;
  const m = s.telemetry.metrics;
  const label = backendLabel(backend.baseURL);
  if (s.attempts > 0 && s.backend && s.chat) m.failovers.inc({ model: s.chat.model, backend: s.backend.label });
  s.attempts++;
  s.backend = { label, provider: backend.provider };
  const started = process.hrtime.bigint();
  const record = (cls: StatusClass) => {
    const labels = { backend: label, gen_ai_provider_name: backend.provider, status_class: cls };
    m.upstreamRequests.inc(labels);
    m.upstreamDuration.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
  };
  return { answered: (status) => record(statusClass(status)), failed: (kind) => record(kind) };
}

/** A chat request was settled (charged `creditsMicro`): its GenAI metrics. */
export function chatSettled(s: RequestScope | undefined, settled: SettledChat, creditsMicro: bigint): void {
  if (!s?.chat) return;
  s.settled = { ...settled, creditsMicro };
  const m = s.telemetry.metrics;
  const labels: GenAiLabels = {
    gen_ai_operation_name: 'chat',
    gen_ai_request_model: s.chat.model,
    gen_ai_provider_name: s.backend?.provider ?? '',
    group: s.chat.group,
    backend: s.backend?.label ?? '',
    protocol: s.chat.protocol,
  };
  if (creditsMicro > 0n) m.creditsCharged.inc({ model: s.chat.model, group: s.chat.group, kind: 'chat' }, Number(creditsMicro) / 1e6);
  // A request no upstream call reached has no GenAI numbers to give.
  if (s.attempts === 0) return;
  m.duration.observe(labels, settled.latencyMs / 1000);
  if (settled.usage) {
    m.tokens.observe({ ...labels, gen_ai_token_type: 'input' }, settled.usage.inputTokens);
    m.tokens.observe({ ...labels, gen_ai_token_type: 'output' }, settled.usage.outputTokens);
  }
  if (settled.ttftMs !== undefined) {
    m.ttft.observe(labels, settled.ttftMs / 1000);
    const tpot = timePerOutputToken(settled.latencyMs, settled.ttftMs, settled.usage?.outputTokens ?? 0);
    if (tpot !== undefined) m.perOutputToken.observe(labels, tpot);
  }
}
