import type { Dispatcher } from 'undici';
import type { Registry } from 'prom-client';
import type { CompileError } from '../../api/snapshot/index.js';
import type { Settings } from '../../kernel/settings.js';
import type { RateLimiter } from '../auth/rate-limit.js';
import type { Billing } from '../billing/index.js';
import type { RuntimeConfig } from '../config/runtime.js';
import type { Store } from '../store/index.js';
import type { Cooldowns } from '../upstreams/index.js';
import type { Logger } from '../../kernel/log.js';
import type { Telemetry } from '../metrics/telemetry.js';

/** Settings every feature may read; set by `tollgate serve` flags and environment. */
export interface GatewayOptions {
  /** How clients reach this gateway, e.g. http://127.0.0.1:8080: the base of signed result URLs. */
  publicBaseURL: string;
  /** Where local result files and other state live (standalone). */
  dataDir?: string;
  /** Allow webhook and media URLs that resolve to loopback (quickstart/tests). */
  allowLoopbackURLs: boolean;
  /** Allow private, link-local and metadata addresses too (tests only). */
  allowPrivateURLs: boolean;
  /** S3-compatible result storage; local folder when unset. */
  s3?: { bucket: string; region?: string; endpoint?: string; prefix?: string; forcePathStyle?: boolean };
  /** Worker poll interval for tasks and webhooks (ms). */
  workerIntervalMs: number;
  adminToken: string;
  /**
   * Standalone: the folders whose ApiKey manifests the console and CLI edit, and the one new keys
   * are written to (watched by the folder source). Absent in a cluster: keys are resources there.
   */
  keyManifests?: { dirs: string[]; writeDir: string };
}

/** What a feature (chat, billing admin, tasks) is built from. */
export interface GatewayDeps {
  store: Store;
  log: Logger;
  billing: Billing;
  registry: Registry;
  /** GenAI and request metrics shared by the features (absent where a gateway is not composed by startGateway). */
  telemetry?: Telemetry;
  /** Backends cooling down after failures: this gateway's own, shared by chat and tasks. */
  cooldowns: Cooldowns;
  /** Group rate limits; chat reports the tokens each request used. */
  limiter: RateLimiter;
  /** The undici Agent every upstream call of this gateway goes through (closed with the gateway). */
  upstreamAgent: Dispatcher;
  /** The config in service (undefined while the proxy is not ready). */
  config: () => RuntimeConfig | undefined;
  options: GatewayOptions;
  /** The process's settings, read once at start. */
  settings: Settings;
  /** Resources the config source left out or refused, and why (the operator's console shows them). */
  configProblems?: () => CompileError[];
}

/** A feature contributes routes and, optionally, background work. */
export interface Feature {
  routes: import('./context.js').Route[];
  start?(): void | Promise<void>;
  stop?(): Promise<void>;
}
