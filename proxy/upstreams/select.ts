import type { CompiledBackend } from './types.js';

const keyOf = (b: CompiledBackend) => `${b.provider}|${b.baseURL}|${b.model}`;

/**
 * Backends cooling down after a connect error, a timeout, a 5xx or a 429. One instance per
 * gateway (two gateways in one process keep their own), keyed by the backend's address and
 * model, so cooldowns survive config swaps that do not change the backend. Times are the
 * process's monotonic clock (performance.now()): a wall clock stepped back must not keep a
 * recovered backend at the back of the line for as long as the step.
 */
export class Cooldowns {
  private readonly until = new Map<string, number>();

  coolDown(backend: CompiledBackend, ms: number, now = performance.now()): void {
    this.until.set(keyOf(backend), now + ms);
  }

  isCooling(backend: CompiledBackend, now = performance.now()): boolean {
    if (this.until.size === 0) return false;
    const until = this.until.get(keyOf(backend));
    if (until === undefined) return false;
    if (until <= now) {
      this.until.delete(keyOf(backend));
      return false;
    }
    return true;
  }

  clear(): void {
    this.until.clear();
  }
}

/** Cooldown after a failure: retry-after for 429 (1-60 s), 10 s for connect errors and timeouts, 5 s for 5xx. */
export function cooldownMs(kind: 'unavailable' | 'timeout' | 'status', status?: number, retryAfterMs?: number): number {
  if (kind !== 'status') return 10_000;
  if (status === 429) return retryAfterMs !== undefined ? Math.min(60_000, Math.max(1_000, retryAfterMs)) : 5_000;
  return 5_000;
}

/**
 * Candidates in the order to try them: the lowest priority first, by weight within a priority;
 * backends cooling down go to the back of the line (still tried when nothing else is left).
 * `random` is injectable for tests.
 */
export function orderBackends(
  backends: readonly CompiledBackend[],
  cooldowns: Cooldowns,
  random: () => number = Math.random,
  now = performance.now(),
): CompiledBackend[] {
  if (backends.length === 1) return [backends[0]!];
  const ready: CompiledBackend[] = [];
  const cooling: CompiledBackend[] = [];
  let i = 0;
  while (i < backends.length) {
    const priority = backends[i]!.priority;
    const tier: CompiledBackend[] = [];
    for (; i < backends.length && backends[i]!.priority === priority; i++) {
      const b = backends[i]!;
      (cooldowns.isCooling(b, now) ? cooling : tier).push(b);
    }
    // Weighted order without replacement.
    while (tier.length > 0) {
      let total = 0;
      for (const b of tier) total += Math.max(0, b.weight);
      let pick = 0;
      if (total > 0) {
        let r = random() * total;
        for (pick = 0; pick < tier.length - 1; pick++) {
          r -= Math.max(0, tier[pick]!.weight);
          if (r < 0) break;
        }
      }
      ready.push(tier.splice(pick, 1)[0]!);
    }
  }
  return cooling.length ? ready.concat(cooling) : ready;
}
