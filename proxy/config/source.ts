import type { CompileError, GatewayConfig } from '../../api/snapshot/index.js';

/**
 * Where the proxy's config comes from: a folder of manifests (standalone) or the operator over
 * gRPC (cluster). A source validates before it swaps: a bad update is reported and the last
 * good config stays in service.
 */
export interface ConfigSource {
  /** The config in service, or undefined until the first good one arrives (the proxy is not ready). */
  current(): GatewayConfig | undefined;
  /** Called after every swap with the new config. Returns an unsubscribe function. */
  onUpdate(listener: (config: GatewayConfig) => void): () => void;
  /** Called when an update is refused (invalid, or it would empty the config); the last good one stays. */
  onReject?(listener: (reason: string) => void): () => void;
  /** Resources the last load left out or refused, and why (standalone; the operator reports them in status). */
  problems?(): CompileError[];
  /** Starts loading/watching; resolves once started (not necessarily once a config is held). */
  start(): Promise<void>;
  stop(): Promise<void>;
}
