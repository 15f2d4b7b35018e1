import type { UpstreamResponse } from './response.js';
import { retryAfterMs } from './retry-after.js';
import { cooldownMs, orderBackends, type Cooldowns } from './select.js';
import type { CompiledBackend } from './types.js';

/** Why one attempt on one backend did not give an answer worth keeping. */
export interface AttemptFailure {
  kind: 'unavailable' | 'timeout' | 'status' | 'aborted';
  /** The upstream's status, for kind 'status' (429, 5xx). */
  status?: number;
  /** The upstream's retry-after, for kind 'status' (retry-after.ts). */
  retryAfterMs?: number;
  /** What to tell a log; never a credential. */
  detail?: string;
}

/** An attempt either answered (whatever the answer) or failed in a way another backend may fix. */
export type Attempt<T> = { answered: T } | { failed: AttemptFailure };

export type FailoverResult<T> = { answered: T; backend: CompiledBackend } | { failed: AttemptFailure | undefined };

/**
 * The one failover loop of chat, count_tokens and tasks: backends in order (priority, weight,
 * cooling ones last) that `usable` accepts, each tried until one answers. A failed backend cools
 * down; an abort (the client left) ends the loop at once. `attempt` is told whether it is the
 * last candidate, so it can keep a retryable answer (a 429 or 5xx) to pass on rather than fail.
 */
export async function failover<T, P>(
  backends: readonly CompiledBackend[],
  cooldowns: Cooldowns,
  usable: (backend: CompiledBackend) => P | undefined,
  attempt: (backend: CompiledBackend, provider: P, isLast: boolean) => Promise<Attempt<T>>,
): Promise<FailoverResult<T>> {
  const candidates: { backend: CompiledBackend; provider: P }[] = [];
  for (const backend of orderBackends(backends, cooldowns)) {
    const provider = usable(backend);
    if (provider !== undefined) candidates.push({ backend, provider });
  }
  let last: AttemptFailure | undefined;
  for (let i = 0; i < candidates.length; i++) {
    const { backend, provider } = candidates[i]!;
    const r = await attempt(backend, provider, i === candidates.length - 1);
    if ('answered' in r) return { answered: r.answered, backend };
    last = r.failed;
    if (last.kind === 'aborted') break;
    cooldowns.coolDown(backend, cooldownMs(last.kind, last.status, last.retryAfterMs));
  }
  return { failed: last };
}

/**
 * An upstream's 429 or 5xx while another backend remains: the answer is dropped (its body drained)
 * and the attempt fails, to be tried on the next backend. Undefined: keep the answer (it is not
 * retryable, or this was the last backend, whose answer the client gets).
 */
export async function retryableFailure(resp: UpstreamResponse, isLast: boolean): Promise<AttemptFailure | undefined> {
  const status = resp.statusCode;
  if (isLast || !(status === 429 || status >= 500)) return undefined;
  const after = retryAfterMs(resp.headers);
  await resp.body.dump().catch(() => {});
  return { kind: 'status', status, ...(after !== undefined ? { retryAfterMs: after } : {}) };
}
