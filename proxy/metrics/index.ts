import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { KeyedCounter } from './counter.js';
import { KeyedHistogram } from './histogram.js';

export interface GatewayMetrics {
  registry: Registry;
  requests: KeyedCounter<readonly ['route', 'status']>;
  duration: KeyedHistogram<readonly ['route', 'status']>;
  /** 1 for the config version in service; the version label lets dashboards compare replicas. */
  config: Gauge<'version'>;
  configSwaps: Counter;
  /** Config updates refused (invalid, or emptying the config); the last good config stayed. */
  configRejections: Counter;
  /** Connections the lean front read (proxy/front/lean.ts), and those it handed to node:http. */
  frontConnections: Counter;
  frontHandoffs: Counter<'reason'>;
}

/** One registry per gateway (tests start several in one process). Labels never carry keys. */
export function createMetrics(): GatewayMetrics {
  const registry = new Registry();
  // The event loop's delay sampled every 100 ms, not prom-client's 10: its timer woke an idle
  // gateway 100 times a second, 0.4% of a core (bench/RESULTS.md, "Idle"); a stall still shows.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  const requests = new KeyedCounter(registry, {
    name: 'tollgate_http_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['route', 'status'] as const,
  });
  const duration = new KeyedHistogram(registry, {
    name: 'tollgate_http_request_duration_seconds',
    help: 'HTTP request duration (to the end of the response) by route and status',
    labelNames: ['route', 'status'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
  });
  const config = new Gauge({
    name: 'tollgate_config_info',
    help: 'The config snapshot in service (value 1, labelled with its version)',
    labelNames: ['version'] as const,
    registers: [registry],
  });
  const configSwaps = new Counter({
    name: 'tollgate_config_swaps_total',
    help: 'Config snapshots taken into service',
    registers: [registry],
  });
  const configRejections = new Counter({
    name: 'tollgate_config_rejections_total',
    help: 'Config updates refused (invalid, or leaving no models or no keys where there were some); the last good config stayed in service',
    registers: [registry],
  });
  const frontConnections = new Counter({
    name: 'tollgate_http_front_connections_total',
    help: 'API connections read by the lean front (TOLLGATE_HTTP_FRONT=lean)',
    registers: [registry],
  });
  const frontHandoffs = new Counter({
    name: 'tollgate_http_front_handoffs_total',
    help: 'API connections the lean front handed to node:http, by reason: method (a request other than POST), route (a POST the front does not serve), head (a POST head outside its subset of HTTP/1.1), closing (shutdown)',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  return { registry, requests, duration, config, configSwaps, configRejections, frontConnections, frontHandoffs };
}
