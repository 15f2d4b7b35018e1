import OpenAI from 'openai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSettings } from '../../kernel/settings.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';

/** What an OTLP/HTTP JSON export carries, as far as the test reads it. */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  status?: { code?: number };
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number; doubleValue?: number } }[];
}
interface Export {
  resourceSpans: { resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}

const KEY = 'sk-service-tracing-test-secret';
const exports: { path: string; contentType: string | undefined; body: Export }[] = [];
let receiver: Server;
let stack: Stack;
let openai: OpenAI;

const spans = () => exports.flatMap((e) => e.body.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
const attrs = (s: OtlpSpan) =>
  Object.fromEntries(
    s.attributes.map((a) => [a.key, a.value.stringValue ?? (a.value.intValue !== undefined ? Number(a.value.intValue) : a.value.doubleValue)]),
  );

async function spansOf(traceId: string, n: number): Promise<OtlpSpan[]> {
  const end = performance.now() + 10_000;
  for (;;) {
    const mine = spans().filter((s) => s.traceId === traceId);
    if (mine.length >= n) return mine;
    if (performance.now() > end) throw new Error(`trace ${traceId}: ${mine.length} spans of ${n}: ${JSON.stringify(mine.map((s) => s.name))}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  // An in-process OTLP/HTTP receiver: the collector's traces endpoint, JSON encoding.
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      exports.push({ path: req.url ?? '', contentType: req.headers['content-type'], body: JSON.parse(Buffer.concat(chunks).toString()) as Export });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  stack = await startStack(
    (sim) => [chatRoute('sim-gpt', `${sim}/v1`, { backend: { model: 'gpt-sim' } }), group('team-t', ['sim-gpt']), apiKey('tracer', KEY, 'team-t')],
    { settings: readSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'tollgate-test', OTEL_BSP_SCHEDULE_DELAY: '50' }) },
  );
  openai = new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  receiver?.close();
});

describe('OpenTelemetry traces', () => {
  it("a chat request continues the client's trace: a server span with GenAI attributes, an upstream span whose context reaches the upstream, a billing commit span", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const clientSpan = '00f067aa0ba902b7';
    const stream = await openai.chat.completions.create(
      { model: 'sim-gpt', messages: [{ role: 'user', content: 'private words [sim:tokens=8]' }], stream: true },
      { headers: { traceparent: `00-${traceId}-${clientSpan}-01`, 'x-request-id': 'trace-req-1' } },
    );
    for await (const _ of stream);

    const mine = await spansOf(traceId, 3);
    expect(exports[0]!.path).toBe('/v1/traces');
    expect(exports[0]!.body.resourceSpans[0]!.resource.attributes).toContainEqual({ key: 'service.name', value: { stringValue: 'tollgate-test' } });
    const server = mine.find((s) => s.parentSpanId === clientSpan)!;
    expect(server).toBeDefined();
    expect(server.name).toBe('chat sim-gpt');
    expect(server.kind).toBe(2); // SERVER
    expect(attrs(server)).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'sim-gpt',
      'gen_ai.provider.name': 'openai',
      'http.route': '/v1/chat/completions',
      'http.response.status_code': 200,
      'tollgate.group': 'team-t',
      'tollgate.key.name': 'tracer',
      'tollgate.request_id': 'trace-req-1',
      'tollgate.outcome': 'ok',
    });
    expect(attrs(server)['gen_ai.usage.output_tokens']).toBeGreaterThanOrEqual(8);
    expect(attrs(server)['tollgate.credits_micro']).toBeGreaterThan(0);

    const upstream = mine.find((s) => s.name === 'chat gpt-sim')!;
    expect(upstream.parentSpanId).toBe(server.spanId);
    expect(upstream.kind).toBe(3); // CLIENT
    expect(attrs(upstream)).toMatchObject({
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-sim',
      'http.response.status_code': 200,
      'server.address': '127.0.0.1',
    });
    // The upstream got the trace, as a child of the gateway's upstream span.
    const rec = stack.sim.recorder.all().find((r) => r.headers['x-request-id'] === 'trace-req-1')!;
    expect(rec.headers.traceparent).toBe(`00-${traceId}-${upstream.spanId}-01`);

    const commit = mine.find((s) => s.name === 'billing commit')!;
    expect(commit.parentSpanId).toBe(server.spanId);

    const text = JSON.stringify(exports);
    expect(text).not.toContain(KEY);
    expect(text).not.toContain('private words');
  });

  it('a request without traceparent starts a trace; an upstream failure marks the spans as errors', async () => {
    await expect(
      openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: '[sim:500]' }] }, { headers: { 'x-request-id': 'trace-req-2' } }),
    ).rejects.toThrow();
    const end = performance.now() + 10_000;
    let server: OtlpSpan | undefined;
    while (!(server = spans().find((s) => attrs(s)['tollgate.request_id'] === 'trace-req-2')) && performance.now() < end)
      await new Promise((r) => setTimeout(r, 50));
    expect(server).toBeDefined();
    expect(server!.parentSpanId ?? '').toBe('');
    expect(server!.status?.code).toBe(2); // ERROR
    expect(attrs(server!)).toMatchObject({ 'tollgate.outcome': 'upstream_error', 'http.response.status_code': 500 });
    const upstream = (await spansOf(server!.traceId, 3)).find((s) => s.parentSpanId === server!.spanId && s.name === 'chat gpt-sim')!;
    expect(attrs(upstream)).toMatchObject({ 'http.response.status_code': 500, 'error.type': '500' });
  });
});
