import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { contentVersion } from './compile.js';
import type { GatewayConfig } from './types.js';

/**
 * The ConfigDiscovery gRPC service (config_discovery.proto), shared by the operator (server) and
 * the proxy (client). Loaded at runtime with @grpc/proto-loader; no generated code.
 */

export interface DiscoveryRequest {
  version_info: string;
  response_nonce: string;
  error_detail: string;
  node_id: string;
}

export interface DiscoveryResponse {
  version_info: string;
  nonce: string;
  config_json: Buffer;
}

export const DISCOVERY_SERVICE = 'tollgate.config.v1alpha1.ConfigDiscovery';

function protoPath(): string {
  // Beside this file in the sources; from dist/api/snapshot, back in the source tree.
  for (const rel of ['./config_discovery.proto', '../../../api/snapshot/config_discovery.proto']) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new Error('config_discovery.proto not found beside api/snapshot/discovery');
}

let cached: grpc.ServiceClientConstructor | undefined;

/** The service client constructor; `.service` is the definition a grpc.Server adds. */
export function discoveryService(): grpc.ServiceClientConstructor {
  if (cached) return cached;
  const def = protoLoader.loadSync(protoPath(), { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { tollgate: { config: { v1alpha1: { ConfigDiscovery: grpc.ServiceClientConstructor } } } };
  cached = pkg.tollgate.config.v1alpha1.ConfigDiscovery;
  return cached;
}

/**
 * Decodes and checks a snapshot as a proxy receives it: JSON, the GatewayConfig shape, and a
 * version equal to the content hash of the body. Returns the config or a reason to NACK.
 */
export function decodeSnapshot(bytes: Uint8Array, expectedVersion?: string): { config: GatewayConfig } | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    return { error: `config_json is not JSON: ${(err as Error).message}` };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { error: 'config_json must be a JSON object' };
  const c = value as Record<string, unknown>;
  if (typeof c.version !== 'string' || c.version === '') return { error: 'config.version must be a non-empty string' };
  for (const field of ['models', 'groups', 'keys'] as const) {
    const v = c[field];
    if (!v || typeof v !== 'object' || Array.isArray(v)) return { error: `config.${field} must be an object` };
  }
  const body = { models: c.models, groups: c.groups, keys: c.keys };
  const actual = contentVersion(body);
  if (actual !== c.version) return { error: `config.version ${c.version} does not match its content (${actual})` };
  if (expectedVersion !== undefined && expectedVersion !== c.version)
    return { error: `version_info ${expectedVersion} differs from config.version ${c.version}` };
  return { config: value as GatewayConfig };
}

export function encodeSnapshot(config: GatewayConfig): Buffer {
  return Buffer.from(JSON.stringify(config));
}
