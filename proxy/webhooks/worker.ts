import { Agent } from 'undici';
import type { Counter } from 'prom-client';
import type { Logger } from '../../kernel/log.js';
import type { Store } from '../store/index.js';
import { USER_AGENT } from '../upstreams/headers.js';
import { assertUrlAllowed, guardedLookup, refusedCause, UrlRefusedError, type UrlPolicy } from '../net/url-guard.js';
import { WorkerLoop } from './loop.js';
import { beginAttempt, claimDeliveries, nextDeliveryDueMs, recordAttempt, releaseDeliveryLeases, type AttemptRecord, type Delivery } from './outbox.js';
import { retryDelayMs } from './schedule.js';

export interface DeliveryWorkerOptions {
  store: Store;
  log: Logger;
  owner: string;
  policy: UrlPolicy;
  /** Seconds before each retry (see schedule.ts). */
  retryScheduleS: readonly number[];
  /** One attempt, connect to last byte. */
  timeoutMs: number;
  intervalMs: number;
  capacity?: number;
  attempts?: Counter<'outcome'>;
}

export const DELIVERY_HEADER = 'x-service-delivery';

/**
 * Delivers the outbox: POSTs the stored bytes with their stored signature, a fresh timestamp and
 * the delivery id; 2xx ends it, anything else (status, timeout, connection error) retries on
 * the schedule until it is spent. A URL the guard refuses fails at once: retrying cannot help.
 * Redirects are not followed (a redirect could lead past the guard).
 */
export function createDeliveryWorker(o: DeliveryWorkerOptions) {
  const agent = new Agent({ connect: { lookup: guardedLookup(o.policy), timeout: Math.min(10_000, o.timeoutMs) }, keepAliveTimeout: 10_000 });
  // Long enough for one attempt and its record; short enough that a replica's crash delays its
  // claimed deliveries by seconds, not minutes.
  const leaseMs = 2 * o.timeoutMs + 1_000;

  const attemptOnce = async (d: Delivery, signal: AbortSignal, attempt: number, startedAt: Date): Promise<AttemptRecord & { refused: boolean }> => {
    const t0 = performance.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    let refused = false;
    try {
      const url = assertUrlAllowed(d.url, o.policy);
      const resp = await agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'x-service-signature': d.signature,
          'x-service-timestamp': String(Math.floor(Date.now() / 1000)),
          [DELIVERY_HEADER]: d.id,
        },
        body: d.body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(o.timeoutMs)]),
        headersTimeout: o.timeoutMs,
        bodyTimeout: o.timeoutMs,
      });
      statusCode = resp.statusCode;
      await resp.body.dump({ limit: 64 * 1024 }).catch(() => {});
    } catch (err) {
      const r = err instanceof UrlRefusedError ? err : refusedCause(err);
      refused = Boolean(r);
      const e = err as Error & { code?: string; cause?: { code?: string } };
      error = r
        ? r.message
        : signal.aborted
          ? 'shutting down'
          : `${e.name === 'TimeoutError' ? 'timed out' : e.message}${(e.code ?? e.cause?.code) ? ` (${e.code ?? e.cause?.code})` : ''}`;
    }
    return { attempt, startedAt, durationMs: performance.now() - t0, statusCode, error, refused };
  };

  const run = async (d: Delivery, signal: AbortSignal) => {
    // Recorded before it is sent: a crash during the attempt leaves it visible, with no outcome.
    const attempt = d.attempts + 1;
    const startedAt = new Date();
    if (!(await beginAttempt(o.store, d, o.owner, attempt, startedAt))) {
      o.log.warn('webhook attempt not made: lease lost', { delivery: d.id, task: d.taskId, attempt });
      return;
    }
    const a = await attemptOnce(d, signal, attempt, startedAt);
    if (signal.aborted && a.statusCode === null) {
      // Stopping: the attempt stays on record (the receiver may have had the request) and the
      // delivery is due again at once, for whichever replica claims it next.
      await recordAttempt(o.store, d, o.owner, a, { outcome: 'retry', inMs: 0 });
      return;
    }
    const ok = a.statusCode !== null && a.statusCode >= 200 && a.statusCode < 300;
    const delay = ok || a.refused ? undefined : retryDelayMs(o.retryScheduleS, a.attempt);
    const next = ok
      ? ({ outcome: 'delivered' } as const)
      : delay === undefined
        ? ({ outcome: 'failed' } as const)
        : ({ outcome: 'retry', inMs: delay } as const);
    o.attempts?.inc({ outcome: next.outcome });
    const recorded = await recordAttempt(o.store, d, o.owner, a, next);
    const fields = { delivery: d.id, task: d.taskId, attempt: a.attempt, status: a.statusCode, error: a.error };
    if (!recorded) o.log.warn('webhook attempt not recorded: lease lost', fields);
    else if (next.outcome === 'failed') o.log.warn('webhook delivery failed for good', fields);
    else if (next.outcome === 'retry') o.log.info('webhook attempt failed; will retry', { ...fields, retryInMs: next.inMs });
  };

  const loop = new WorkerLoop<Delivery>({
    name: 'webhook delivery',
    intervalMs: o.intervalMs,
    capacity: o.capacity ?? 16,
    log: o.log,
    claim: (n) => claimDeliveries(o.store, o.owner, n, leaseMs),
    nextDueMs: () => nextDeliveryDueMs(o.store),
    run,
  });

  return {
    start: () => loop.start(),
    wake: () => loop.wake(),
    async stop(graceMs: number) {
      await loop.stop(graceMs);
      await releaseDeliveryLeases(o.store, o.owner).catch((err: Error) => o.log.warn('could not release webhook leases', { error: err.message }));
      await agent.close();
    },
  };
}
export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;
