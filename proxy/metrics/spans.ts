import { SpanKind, SpanStatusCode, type Context, type Span } from '@opentelemetry/api';

/**
 * What the request path needs of spans, from the OpenTelemetry API alone: the SDK and the OTLP
 * exporter (tracing.ts, some 10 MB) load only when traces are exported.
 */

/** A span and the context its children start from. */
export interface Traced {
  span: Span;
  ctx: Context;
}

export function endSpan(span: Span, error?: string): void {
  if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
  span.end();
}

export { SpanKind };
