import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Recorder, type RecordedRequest } from './recorder.js';

/**
 * The offline upstream simulator: one node:http server speaking the providers' real wire
 * protocols, so the gateway, its tests and the quickstart run without network or keys.
 * Each protocol contributes routes; the server only dispatches and records.
 */
export interface SimRequest {
  req: IncomingMessage;
  res: ServerResponse;
  path: string;
  query: URLSearchParams;
  /** Raw request body (empty for GET). */
  body: Buffer;
  /** Parsed JSON body when it is one, else undefined. */
  json: Record<string, unknown> | undefined;
  /** Path parameters of ":name" segments. */
  params: Record<string, string>;
  sim: SimContext;
  /** Aborts when the client goes away before the response ends. */
  signal: AbortSignal;
  /** What the recorder keeps of this request. */
  record: RecordedRequest;
}

export interface SimContext {
  /** Base latency before the first byte, in ms (a `[sim:slow=MS]` directive adds to it). */
  latencyMs: number;
  /** Delay between stream events, in ms. */
  chunkDelayMs: number;
  recorder: Recorder;
  /** The simulator's own address, e.g. http://127.0.0.1:8090 (for URLs it hands out). */
  url: string;
}

export interface SimRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Exact path or ":name" segments. */
  path: string;
  handler(r: SimRequest): Promise<void> | void;
}

export interface SimulatorOptions {
  port?: number;
  host?: string;
  latencyMs?: number;
  chunkDelayMs?: number;
  routes: SimRoute[];
}

export interface Simulator {
  url: string;
  recorder: Recorder;
  context: SimContext;
  close(): Promise<void>;
}

function match(route: SimRoute, path: string): Record<string, string> | undefined {
  if (!route.path.includes('/:')) return route.path === path ? {} : undefined;
  const want = route.path.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    if (w.startsWith(':')) {
      if (!got[i]) return undefined;
      params[w.slice(1)] = decodeURIComponent(got[i]!);
    } else if (w !== got[i]) return undefined;
  }
  return params;
}

export async function startSimulatorServer(opts: SimulatorOptions): Promise<Simulator> {
  const recorder = new Recorder();
  const context: SimContext = { latencyMs: opts.latencyMs ?? 0, chunkDelayMs: opts.chunkDelayMs ?? 0, recorder, url: '' };
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let json: Record<string, unknown> | undefined;
      if (body.length > 0 && /json/i.test(req.headers['content-type'] ?? '')) {
        try {
          const v: unknown = JSON.parse(body.toString('utf8'));
          if (v && typeof v === 'object' && !Array.isArray(v)) json = v as Record<string, unknown>;
        } catch {
          // handlers answer invalid JSON in their protocol's shape
        }
      }
      const controller = new AbortController();
      res.once('close', () => {
        if (!res.writableFinished) controller.abort();
      });
      const record = recorder.add({ method: req.method ?? 'GET', path, query: query.toString(), headers: req.headers, body });
      controller.signal.addEventListener('abort', () => (record.aborted = true), { once: true });
      res.once('finish', () => (record.completed = true));
      for (const route of opts.routes) {
        if (route.method !== req.method) continue;
        const params = match(route, path);
        if (!params) continue;
        Promise.resolve(route.handler({ req, res, path, query, body, json, params, sim: context, signal: controller.signal, record })).catch((err: Error) => {
          if (!res.headersSent) {
            res.writeHead(500, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ error: { message: `simulator error: ${err.message}`, type: 'server_error' } }));
          } else res.destroy();
        });
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `simulator: no route for ${req.method} ${path}`, type: 'invalid_request_error' } }));
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const url = `http://${opts.host ?? '127.0.0.1'}:${addr.port}`;
  context.url = url;
  return {
    url,
    recorder,
    context,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
