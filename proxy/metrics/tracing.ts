import { ROOT_CONTEXT, SpanKind, trace, type Attributes } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { IncomingHttpHeaders } from 'node:http';

export interface TracingOptions {
  /** OTLP/HTTP traces endpoint, e.g. http://collector:4318/v1/traces. */
  endpoint: string;
  serviceName: string;
  /** How long finished spans wait to be sent in a batch (ms). */
  batchDelayMs?: number;
}

import type { Traced } from './spans.js';

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (h: IncomingHttpHeaders) => Object.keys(h),
  get: (h: IncomingHttpHeaders, key: string) => h[key],
};
const setter = { set: (h: Record<string, string>, key: string, value: string) => void (h[key] = value) };

/**
 * OpenTelemetry tracing with the official SDK, exported over OTLP/HTTP. Its own provider (never
 * the global one, so gateways in one process keep their own) and explicit parent contexts taken
 * from the request's telemetry scope (no context manager is needed). Attributes carry names and
 * numbers only: never a key, a prompt or a header value other than the trace context.
 */
export class Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer;

  constructor(o: TracingOptions) {
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': o.serviceName }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: o.endpoint }), { scheduledDelayMillis: o.batchDelayMs ?? 2000 })],
    });
    this.tracer = this.provider.getTracer('tollgate');
  }

  /** The server span of a request, child of the client's `traceparent` when it sent a valid one. */
  request(headers: IncomingHttpHeaders, name: string, attributes: Attributes): Traced {
    const parent = propagator.extract(ROOT_CONTEXT, headers, getter);
    const span = this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    return { span, ctx: trace.setSpan(parent, span) };
  }

  child(parent: Traced, name: string, kind: SpanKind, attributes: Attributes): Traced {
    const span = this.tracer.startSpan(name, { kind, attributes }, parent.ctx);
    return { span, ctx: trace.setSpan(parent.ctx, span) };
  }

  /** Writes `traceparent` (and `tracestate`) for the span into outgoing headers. */
  inject(t: Traced, headers: Record<string, string>): void {
    propagator.inject(t.ctx, headers, setter);
  }

  /** Sends what is buffered and stops. */
  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
