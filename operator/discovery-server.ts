import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { discoveryService, encodeSnapshot, type DiscoveryRequest, type DiscoveryResponse } from '../api/snapshot/discovery.js';
import type { GatewayConfig } from '../api/snapshot/index.js';
import type { Logger } from '../kernel/log.js';

export interface DiscoveryServerOptions {
  /** Bearer token proxies must present; undefined -> no auth (logged as a warning). */
  token?: string;
  tlsCert?: string;
  tlsKey?: string;
  log: Logger;
  onChange?: () => void;
}

interface Peer {
  id: number;
  nodeId: string;
  call: grpc.ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>;
  /** Version last sent and its nonce. */
  sentVersion?: string;
  nonce?: string;
  /** Version the proxy ACKed (or said it holds). */
  acked?: string;
  lastNack?: string;
  greeted?: boolean;
}

/**
 * ConfigDiscovery.Stream: every proxy stream receives the current snapshot, then every new one.
 * ACK/NACK by version and nonce as in xDS; a NACK is logged and counted, and the proxy keeps its
 * last good config (the operator does not resend the same version to it).
 */
export class DiscoveryServer {
  private readonly server = new grpc.Server({ 'grpc.keepalive_time_ms': 20_000, 'grpc.keepalive_permit_without_calls': 1 });
  private readonly peers = new Map<number, Peer>();
  private snapshot: { config: GatewayConfig; bytes: Buffer } | undefined;
  private nextId = 1;
  nacks = 0;

  constructor(private readonly opts: DiscoveryServerOptions) {
    this.server.addService(discoveryService().service, { Stream: (call: grpc.ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>) => this.stream(call) });
  }

  async listen(port: number, host = '0.0.0.0'): Promise<number> {
    const creds =
      this.opts.tlsCert && this.opts.tlsKey
        ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(this.opts.tlsCert), private_key: readFileSync(this.opts.tlsKey) }], false)
        : grpc.ServerCredentials.createInsecure();
    if (!this.opts.token) this.opts.log.warn('TOLLGATE_DISCOVERY_TOKEN is not set: config discovery accepts any client');
    return new Promise((resolve, reject) => {
      this.server.bindAsync(`${host}:${port}`, creds, (err, bound) => (err ? reject(err) : resolve(bound)));
    });
  }

  /** Publishes a snapshot; pushed to every stream whose last sent version differs. */
  setSnapshot(config: GatewayConfig): void {
    if (this.snapshot?.config.version === config.version) return;
    this.snapshot = { config, bytes: encodeSnapshot(config) };
    for (const p of this.peers.values()) this.push(p);
    this.opts.onChange?.();
  }

  version(): string | undefined {
    return this.snapshot?.config.version;
  }

  stats(): { connected: number; acked: number; peers: { nodeId: string; acked?: string; lastNack?: string }[] } {
    const peers = [...this.peers.values()];
    const v = this.snapshot?.config.version;
    return {
      connected: peers.length,
      acked: peers.filter((p) => v !== undefined && p.acked === v).length,
      peers: peers.map((p) => ({ nodeId: p.nodeId, ...(p.acked ? { acked: p.acked } : {}), ...(p.lastNack ? { lastNack: p.lastNack } : {}) })),
    };
  }

  async close(): Promise<void> {
    for (const p of this.peers.values()) p.call.end();
    this.peers.clear();
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 500);
      this.server.tryShutdown(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  private authorized(md: grpc.Metadata): boolean {
    if (!this.opts.token) return true;
    const got = String(md.get('authorization')[0] ?? '');
    const want = `Bearer ${this.opts.token}`;
    const a = Buffer.from(got);
    const b = Buffer.from(want);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  private stream(call: grpc.ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>) {
    if (!this.authorized(call.metadata)) {
      this.opts.log.warn('config discovery: rejected a client without a valid token', { peer: call.getPeer() });
      call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: 'missing or invalid bearer token', metadata: new grpc.Metadata() });
      return;
    }
    const peer: Peer = { id: this.nextId++, nodeId: '', call };
    this.peers.set(peer.id, peer);
    this.opts.onChange?.();
    const drop = () => {
      if (this.peers.delete(peer.id)) {
        this.opts.log.info('proxy disconnected', { node: peer.nodeId });
        this.opts.onChange?.();
      }
    };
    call.on('data', (req: DiscoveryRequest) => this.onRequest(peer, req));
    call.on('end', () => {
      drop();
      call.end();
    });
    call.on('cancelled', drop);
    call.on('error', drop);
    call.on('close', drop);
  }

  private onRequest(peer: Peer, req: DiscoveryRequest) {
    const first = !peer.greeted;
    peer.greeted = true;
    if (req.node_id) peer.nodeId = req.node_id;
    if (first) {
      this.opts.log.info('proxy connected', { node: peer.nodeId, holds: req.version_info || null });
      if (req.version_info) peer.acked = req.version_info;
      this.push(peer);
      this.opts.onChange?.();
      return;
    }
    if (req.response_nonce && req.response_nonce !== peer.nonce) return; // a stale answer
    if (req.error_detail) {
      this.nacks++;
      peer.lastNack = peer.sentVersion;
      this.opts.log.warn('proxy rejected a snapshot (NACK)', {
        node: peer.nodeId,
        version: peer.sentVersion,
        keeps: req.version_info || null,
        error: req.error_detail,
      });
    } else {
      peer.acked = req.version_info;
      const { connected, acked } = this.stats();
      this.opts.log.info('proxy acknowledged a snapshot', { node: peer.nodeId, version: req.version_info, proxiesAcked: acked, proxiesConnected: connected });
    }
    this.opts.onChange?.();
  }

  private push(peer: Peer) {
    const s = this.snapshot;
    if (!s) return; // nothing compiled yet: the proxy keeps whatever it has
    if (peer.sentVersion === s.config.version) return;
    if (!peer.sentVersion && peer.acked === s.config.version) {
      peer.sentVersion = s.config.version; // it already holds this one (reconnect)
      return;
    }
    peer.sentVersion = s.config.version;
    peer.nonce = randomBytes(8).toString('hex');
    peer.call.write({ version_info: s.config.version, nonce: peer.nonce, config_json: s.bytes });
  }
}
