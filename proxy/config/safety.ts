import type { GatewayConfig } from '../../api/snapshot/index.js';

/**
 * A change that would take every model or every key out of service where there were some: an
 * emptied folder, a mount that came up empty, a selector that matches nothing. Served, it would
 * answer every request 401 or 404 while /readyz says ready, so it is refused like an invalid
 * config (the last good one stays). A gateway that starts empty serves empty: that was asked for.
 */
export function emptiedBy(current: GatewayConfig | undefined, next: GatewayConfig): string | undefined {
  if (!current) return undefined;
  const had = (c: GatewayConfig) => ({ models: Object.keys(c.models).length, keys: Object.keys(c.keys).length });
  const before = had(current);
  const after = had(next);
  if (before.models > 0 && after.models === 0) return `it has no models where the config in service has ${before.models}`;
  if (before.keys > 0 && after.keys === 0) return `it has no API keys where the config in service has ${before.keys}`;
  return undefined;
}
