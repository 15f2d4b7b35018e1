import type { Registry } from 'prom-client';
import type { Logger } from '../../kernel/log.js';
import { accessLine, requestOutcome, type Finished } from './access.js';
import { backendGauges, backendLabel, genAiMetrics, type BackendState, statusClass, timePerOutputToken, type GenAiMetrics, type StatusClass } from './genai.js';
import { endSpan, SpanKind } from './spans.js';
import type { Tracing } from './tracing.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { RequestScope, SettledChat } from './scope.js';

export type { BackendState, RequestScope, SettledChat };

/** A backend as telemetry sees it (structurally the snapshot's CompiledBackend). */
export interface BackendRef {
  provider: string;
  baseURL: string;
  /** The upstream model name. */
  model: string;
}

export interface UpstreamProbe {
  /** The upstream answered with this status (its head arrived). */
  answered(status: number): void;
  /** The call failed before an answer: timeout, unavailable or aborted. */
  failed(kind: 'timeout' | 'unavailable' | 'aborted'): void;
}

const NO_PROBE: UpstreamProbe = { answered: () => {}, failed: () => {} };

/**
 * One gateway's request telemetry: GenAI metrics and the access log. begin() makes a request's
 * scope, which the request carries; upstream calls and billing report into it, end() counts it.
 */
export class Telemetry {
  readonly metrics: GenAiMetrics;

  constructor(
    registry: Registry,
    private readonly log: Logger,
    /** The backends of the config in service and whether each is cooling down, read at each scrape. */
    backends: () => BackendState[] = () => [],
    /** Set when traces are exported (an OTLP endpoint is configured). */
    readonly tracing?: Tracing,
  ) {
    this.metrics = genAiMetrics(registry);
    backendGauges(registry, backends);
  }

  begin(requestId: string, method: string, headers: IncomingHttpHeaders): RequestScope {
    const scope: RequestScope = { telemetry: this, requestId, attempts: 0 };
    if (this.tracing) scope.trace = this.tracing.request(headers, method, { 'http.request.method': method, 'tollgate.request_id': requestId });
    return scope;
  }

  /** The request's end: its outcome counted, its access-log line written. */
  end(scope: RequestScope, f: Finished): void {
    const { outcome, reason } = requestOutcome(f, scope.settled?.status);
    const model = scope.chat?.model ?? '';
    const group = scope.chat?.group ?? f.group ?? '';
    this.metrics.requests.at([f.route, model, group, outcome, reason]).inc();
    if (scope.trace) endRequestSpan(scope, f, outcome, reason);
    const level = f.status >= 500 ? 'warn' : 'info';
    // The line is built only when it is written (a gateway logging at warn skips it).
    if (this.log.enabled?.(level) === false) return;
    const line = accessLine(scope, f.traceId || !scope.trace ? f : { ...f, traceId: scope.trace.span.spanContext().traceId }, outcome, reason);
    this.log[level]('request', line);
  }
}

/** Credits are held for a chat request: from here on its metrics carry its model, group and protocol. */
export function chatHeld(s: RequestScope | undefined, model: string, group: string, protocol: string): RequestScope | undefined {
  if (s) s.chat = { model, group, protocol };
  return s;
}

/** An upstream call of the current request starts; the probe is told how it ended. With tracing on, `headers` get the call's `traceparent`. */
export function watchUpstream(s: RequestScope | undefined, backend: BackendRef, headers?: Record<string, string>): UpstreamProbe {
  if (!s) return NO_PROBE;
  const m = s.telemetry.metrics;
  const label = backendLabel(backend.baseURL);
  if (s.attempts > 0 && s.backend && s.chat) m.failovers.inc({ model: s.chat.model, backend: s.backend.label });
  s.attempts++;
  s.backend = { label, provider: backend.provider };
  const started = process.hrtime.bigint();
  const tracing = s.telemetry.tracing;
  const child =
    tracing && s.trace
      ? tracing.child(s.trace, `${s.chat ? 'chat' : 'call'} ${backend.model}`, SpanKind.CLIENT, {
          'gen_ai.operation.name': s.chat ? 'chat' : 'call',
          'gen_ai.provider.name': backend.provider,
          'gen_ai.request.model': backend.model,
          'tollgate.backend': label,
          'tollgate.attempt': s.attempts,
          ...serverOf(backend.baseURL),
        })
      : undefined;
  if (child && headers) tracing!.inject(child, headers);
  const record = (cls: StatusClass, status?: number) => {
    const values = [label, backend.provider, cls] as const;
    m.upstreamRequests.at(values).inc();
    m.upstreamDuration.at(values).observe(Number(process.hrtime.bigint() - started) / 1e9);
    if (!child) return;
    if (status !== undefined) child.span.setAttribute('http.response.status_code', status);
    const failed = status === undefined || status >= 500 || status === 429;
    if (failed) child.span.setAttribute('error.type', status === undefined ? cls : String(status));
    endSpan(child.span, failed ? cls : undefined);
  };
  return { answered: (status) => record(statusClass(status), status), failed: (kind) => record(kind) };
}

/** A chat request was settled (charged `creditsMicro`): its GenAI metrics. */
export function chatSettled(s: RequestScope | undefined, settled: SettledChat, creditsMicro: bigint): void {
  if (!s?.chat) return;
  s.settled = { ...settled, creditsMicro };
  const m = s.telemetry.metrics;
  const model = s.chat.model;
  const provider = s.backend?.provider ?? '';
  const backend = s.backend?.label ?? '';
  const { group, protocol } = s.chat;
  if (creditsMicro > 0n) m.creditsCharged.at([model, group, 'chat']).inc(Number(creditsMicro) / 1e6);
  // A request no upstream call reached has no GenAI numbers to give.
  if (s.attempts === 0) return;
  // In the order of GENAI_LABELS.
  const values = ['chat', model, provider, group, backend, protocol] as const;
  m.duration.at(values).observe(settled.latencyMs / 1000);
  if (settled.usage) {
    m.tokens.at(['chat', model, provider, group, backend, protocol, 'input']).observe(settled.usage.inputTokens);
    m.tokens.at(['chat', model, provider, group, backend, protocol, 'output']).observe(settled.usage.outputTokens);
  }
  if (settled.ttftMs !== undefined) {
    m.ttft.at(values).observe(settled.ttftMs / 1000);
    const tpot = timePerOutputToken(settled.latencyMs, settled.ttftMs, settled.usage?.outputTokens ?? 0);
    if (tpot !== undefined) m.perOutputToken.at(values).observe(tpot);
  }
}

/** A child span of the request's (none when tracing is off); the returned function ends it. */
export function childSpan(s: RequestScope | undefined, name: string): (error?: string) => void {
  const tracing = s?.telemetry.tracing;
  if (!tracing || !s?.trace) return () => {};
  const child = tracing.child(s.trace, name, SpanKind.INTERNAL, {});
  return (error) => endSpan(child.span, error);
}

function serverOf(baseURL: string): Record<string, string | number> {
  try {
    const u = new URL(baseURL);
    return { 'server.address': u.hostname, 'server.port': Number(u.port) || (u.protocol === 'https:' ? 443 : 80) };
  } catch {
    return {};
  }
}

/** The server span's name and attributes once the request is over: what the access log says, as GenAI attributes. */
function endRequestSpan(scope: RequestScope, f: Finished, outcome: string, reason: string): void {
  const span = scope.trace!.span;
  const chat = scope.chat;
  span.updateName(chat ? `chat ${chat.model}` : `${f.method} ${f.route}`);
  span.setAttributes({
    'http.route': f.route,
    'http.response.status_code': f.status,
    'tollgate.outcome': outcome,
    ...(reason ? { 'tollgate.reason': reason } : {}),
    ...(f.keyName !== undefined ? { 'tollgate.key.name': f.keyName } : {}),
    ...((chat?.group ?? f.group) !== undefined ? { 'tollgate.group': chat?.group ?? f.group } : {}),
  });
  if (chat) {
    span.setAttributes({ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': chat.model, 'tollgate.protocol': chat.protocol });
  }
  if (scope.backend) span.setAttributes({ 'gen_ai.provider.name': scope.backend.provider, 'tollgate.backend': scope.backend.label });
  const settled = scope.settled;
  if (settled) {
    span.setAttribute('tollgate.credits_micro', Number(settled.creditsMicro));
    if (settled.usage) {
      span.setAttributes({ 'gen_ai.usage.input_tokens': settled.usage.inputTokens, 'gen_ai.usage.output_tokens': settled.usage.outputTokens });
    }
    if (settled.ttftMs !== undefined) span.setAttribute('gen_ai.server.time_to_first_token', settled.ttftMs / 1000);
  }
  const failed = outcome === 'failed' || outcome === 'upstream_error';
  if (failed) span.setAttribute('error.type', reason || outcome);
  endSpan(span, failed ? reason || outcome : undefined);
}
