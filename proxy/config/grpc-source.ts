import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { decodeSnapshot, discoveryService, type DiscoveryRequest, type DiscoveryResponse } from '../../api/snapshot/discovery.js';
import type { GatewayConfig } from '../../api/snapshot/index.js';
import type { Logger } from '../../kernel/log.js';
import { Listeners } from './listeners.js';
import { emptiedBy } from './safety.js';
import { RuntimeConfig } from './runtime.js';
import type { ConfigSource } from './source.js';

export interface GrpcSourceOptions {
  /** grpc://host:port (plain) or grpcs://host:port (TLS). */
  url: string;
  /** Sent as `authorization: Bearer <token>` (TOLLGATE_DISCOVERY_TOKEN). */
  token?: string;
  /** PEM file of the CA that signed the operator's certificate (grpcs://); system roots when absent. */
  caFile?: string;
  /** This proxy's name in the operator's logs; the pod name in a cluster. */
  nodeId?: string;
  log: Logger;
  /** Reconnect delays: first, and the cap of the exponential growth (jitter applies to both). */
  backoff?: { initialMs?: number; maxMs?: number };
}

/** Where to connect and how, from a --config-from URL. */
export function parseDiscoveryUrl(url: string): { target: string; tls: boolean } {
  const m = /^(grpcs?):\/\/([^/?#]+)\/?$/.exec(url.trim());
  if (!m) throw new Error(`config source "${url}" must be grpc://HOST:PORT or grpcs://HOST:PORT`);
  const hostPort = m[2]!;
  if (!/:\d{1,5}$/.test(hostPort)) throw new Error(`config source "${url}" needs a port (grpc://HOST:PORT)`);
  return { target: hostPort, tls: m[1] === 'grpcs' };
}

/**
 * The reconnect delay's ceiling: after an operator outage every proxy is back within about this
 * long, so a revocation made meanwhile reaches them all within seconds, not half a minute.
 */
export const RECONNECT = { initialMs: 250, maxMs: 5_000 };

/**
 * Full jitter over a capped exponential (AWS architecture blog): reconnecting proxies spread out
 * instead of hitting a restarted operator in step.
 */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** Checks a received snapshot as the proxy will use it; returns the config or why it is rejected. */
export function acceptSnapshot(res: DiscoveryResponse): { config: GatewayConfig } | { error: string } {
  const decoded = decodeSnapshot(res.config_json, res.version_info);
  if ('error' in decoded) return decoded;
  try {
    // Builds the hot-path form once: bad money strings and the like fail here, not on a request.
    new RuntimeConfig(decoded.config);
  } catch (err) {
    return { error: `config cannot be served: ${(err as Error).message}` };
  }
  return decoded;
}

type Stream = grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;

/** The largest snapshot a proxy accepts. */
export const MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024;

/**
 * Cluster config: one ConfigDiscovery.Stream to the operator, in the manner of Envoy's xDS. The
 * proxy says which version it holds, ACKs a good snapshot (and swaps it in) or NACKs a bad one
 * with the reason and keeps the last good one. A lost stream is reopened with capped exponential
 * backoff and jitter; meanwhile the last snapshot stays in service.
 */
export class GrpcConfigSource implements ConfigSource {
  private config: GatewayConfig | undefined;
  private readonly listeners = new Listeners<GatewayConfig>();
  private readonly rejections = new Listeners<string>();
  private client: grpc.Client | undefined;
  private stream: Stream | undefined;
  private timer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private stopped = false;
  private readonly target: string;
  private readonly tls: boolean;
  private readonly nodeId: string;
  /** Whether a stream is open and has received at least one response. */
  connected = false;
  /** The last rejection sent to the operator, for logs and tests. */
  lastNack: string | undefined;

  constructor(private readonly opts: GrpcSourceOptions) {
    const { target, tls } = parseDiscoveryUrl(opts.url);
    this.target = target;
    this.tls = tls;
    this.nodeId = opts.nodeId ?? hostname();
    if (opts.caFile && !tls) throw new Error('a CA file is only used with grpcs:// config sources');
  }

  current(): GatewayConfig | undefined {
    return this.config;
  }

  onReject(listener: (reason: string) => void): () => void {
    return this.rejections.add(listener);
  }

  onUpdate(listener: (config: GatewayConfig) => void): () => void {
    return this.listeners.add(listener);
  }

  /** Opens the stream and returns at once: readiness waits for the first snapshot, not for this. */
  start(): Promise<void> {
    const creds = this.tls ? grpc.credentials.createSsl(this.opts.caFile ? readFileSync(this.opts.caFile) : null) : grpc.credentials.createInsecure();
    const Client = discoveryService();
    this.client = new Client(this.target, creds, {
      // Notice an operator that vanished without closing the connection (node lost, network cut).
      'grpc.keepalive_time_ms': 15_000,
      'grpc.keepalive_timeout_ms': 5_000,
      'grpc.keepalive_permit_without_calls': 1,
      // gRPC's default 4 MiB would refuse a snapshot of some 25,000 keys.
      'grpc.max_receive_message_length': MAX_SNAPSHOT_BYTES,
    });
    if (!this.opts.token) this.opts.log.warn('TOLLGATE_DISCOVERY_TOKEN is not set: connecting to config discovery without a token');
    this.open();
    return Promise.resolve();
  }

  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.stream?.cancel();
    this.stream = undefined;
    this.client?.close();
    return Promise.resolve();
  }

  private open(): void {
    if (this.stopped || !this.client) return;
    const md = new grpc.Metadata();
    if (this.opts.token) md.set('authorization', `Bearer ${this.opts.token}`);
    const stream = (this.client as unknown as { Stream(md: grpc.Metadata): Stream }).Stream(md);
    this.stream = stream;
    let ended = false;
    const lost = (why: string, code?: number) => {
      if (ended) return;
      ended = true;
      if (this.stream === stream) this.stream = undefined;
      this.connected = false;
      if (this.stopped) return;
      const wait = backoffDelay(this.attempt++, this.opts.backoff?.initialMs ?? RECONNECT.initialMs, this.opts.backoff?.maxMs ?? RECONNECT.maxMs);
      const fields = { operator: this.opts.url, retryInMs: wait, serving: this.config?.version ?? null, reason: why };
      // An unauthenticated stream will not heal by itself: say so loudly.
      if (code === grpc.status.UNAUTHENTICATED || code === grpc.status.PERMISSION_DENIED)
        this.opts.log.error('config discovery refused this proxy (check TOLLGATE_DISCOVERY_TOKEN)', fields);
      else this.opts.log.warn('config discovery stream lost; keeping the config in service', fields);
      this.timer = setTimeout(() => this.open(), wait);
    };
    stream.on('data', (res: DiscoveryResponse) => this.onResponse(stream, res));
    stream.on('error', (err: grpc.ServiceError) => lost(err.details || err.message, err.code));
    stream.on('end', () => lost('the operator ended the stream'));
    stream.on('status', (s: grpc.StatusObject) => {
      if (s.code !== grpc.status.OK) lost(s.details, s.code);
    });
    // The first request says what this proxy holds, so a reconnect does not resend the same snapshot.
    stream.write({ version_info: this.config?.version ?? '', response_nonce: '', error_detail: '', node_id: this.nodeId });
  }

  private onResponse(stream: Stream, res: DiscoveryResponse): void {
    if (!this.connected) {
      this.connected = true;
      this.attempt = 0;
    }
    const accepted = acceptSnapshot(res);
    const emptied = 'config' in accepted ? emptiedBy(this.config, accepted.config) : undefined;
    const checked = emptied ? { error: `snapshot ${res.version_info} refused: ${emptied}` } : accepted;
    if ('error' in checked) {
      this.rejections.emit(checked.error);
      this.lastNack = checked.error;
      this.opts.log.error('config snapshot rejected (NACK); keeping the last good one', {
        version: res.version_info,
        serving: this.config?.version ?? null,
        error: checked.error,
      });
      stream.write({ version_info: this.config?.version ?? '', response_nonce: res.nonce, error_detail: checked.error, node_id: this.nodeId });
      return;
    }
    const config = checked.config;
    const changed = this.config?.version !== config.version;
    this.config = config;
    stream.write({ version_info: config.version, response_nonce: res.nonce, error_detail: '', node_id: this.nodeId });
    if (!changed) return;
    this.opts.log.info('config loaded', {
      version: config.version,
      models: Object.keys(config.models).length,
      groups: Object.keys(config.groups).length,
      keys: Object.keys(config.keys).length,
    });
    this.listeners.emit(config);
  }
}
