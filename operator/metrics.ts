import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from 'prom-client';

/** The operator's own registry (never the prom-client global one). */
export class OperatorMetrics {
  readonly registry = new Registry();
  readonly snapshotInfo = new Gauge({
    name: 'tollgate_operator_snapshot_info',
    help: 'The config snapshot in service (1 for the current version)',
    labelNames: ['version'],
    registers: [this.registry],
  });
  readonly snapshotResources = new Gauge({
    name: 'tollgate_operator_snapshot_objects',
    help: 'Models, groups and keys in the current snapshot',
    labelNames: ['type'],
    registers: [this.registry],
  });
  readonly compileErrors = new Gauge({
    name: 'tollgate_operator_compile_errors',
    help: 'Resources left out of the snapshot by compile errors',
    registers: [this.registry],
  });
  readonly proxiesConnected = new Gauge({
    name: 'tollgate_operator_proxies_connected',
    help: 'Proxy streams connected to config discovery',
    registers: [this.registry],
  });
  readonly proxiesAcked = new Gauge({
    name: 'tollgate_operator_proxies_acked',
    help: 'Proxy streams that ACKed the current snapshot',
    registers: [this.registry],
  });
  readonly nacks = new Counter({ name: 'tollgate_operator_nacks_total', help: 'Snapshots rejected by proxies', registers: [this.registry] });
  readonly reconciles = new Counter({ name: 'tollgate_operator_reconciles_total', help: 'Compile passes', registers: [this.registry] });
  readonly statusWrites = new Counter({
    name: 'tollgate_operator_status_writes_total',
    help: 'Status subresource writes',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly keysMinted = new Counter({ name: 'tollgate_operator_keys_minted_total', help: 'API keys minted into Secrets', registers: [this.registry] });
  readonly leader = new Gauge({ name: 'tollgate_operator_leader', help: '1 while this replica holds the lease', registers: [this.registry] });
  readonly queueRetries = new Counter({
    name: 'tollgate_operator_queue_retries_total',
    help: 'Work items retried after a failure',
    registers: [this.registry],
  });

  private lastVersion: string | undefined;

  setVersion(version: string) {
    if (this.lastVersion) this.snapshotInfo.remove(this.lastVersion);
    this.snapshotInfo.set({ version }, 1);
    this.lastVersion = version;
  }
}

/** /metrics, /healthz (process up), /readyz (informers synced and a snapshot published). */
export async function serveMetrics(metrics: OperatorMetrics, port: number, ready: () => boolean, host = '0.0.0.0'): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      metrics.registry
        .metrics()
        .then((body) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(body);
        })
        .catch((err: unknown) => {
          res.writeHead(500);
          res.end(String(err));
        });
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok\n');
      return;
    }
    if (path === '/readyz') {
      const ok = ready();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' });
      res.end(ok ? 'ok\n' : 'not ready: waiting for the first snapshot\n');
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return { server, port: (server.address() as AddressInfo).port };
}
