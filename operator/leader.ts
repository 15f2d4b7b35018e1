import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../kernel/log.js';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  /** How long a lease is valid without renewal (default 15s). */
  leaseDurationMs?: number;
  /** How often the holder renews and the others retry (default 2s). */
  retryMs?: number;
  onStartedLeading?: () => void;
  onStoppedLeading?: () => void;
}

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: the holder renews
 * renewTime every retry period; another replica takes over once it has seen the lease unchanged
 * for leaseDuration. Like client-go it times that from when it saw the record change, on its own
 * monotonic clock, and never compares renewTime (another node's wall clock) with its own: a
 * holder whose clock runs behind is not taken over while it renews, and a step of either clock
 * neither ends a lease early nor makes a lost one last. Writes carry the resourceVersion read, so
 * two candidates cannot both win (409). On stop the holder releases the lease so a standby takes
 * over without waiting.
 */
export class LeaderElector {
  private leader = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  /** When this replica's last renewal that landed was sent (performance.now()). */
  private lastRenew = 0;
  /** The lease's record as last read or written, and when it was seen to change (performance.now()). */
  private observed: string | undefined;
  private observedAt = 0;
  private running: Promise<void> = Promise.resolve();
  private readonly duration: number;
  private readonly retry: number;

  constructor(
    private readonly api: CoordinationV1Api,
    private readonly opts: LeaderOptions,
    private readonly log: Logger,
  ) {
    this.duration = opts.leaseDurationMs ?? 15_000;
    this.retry = opts.retryMs ?? 2_000;
  }

  isLeader(): boolean {
    return this.leader;
  }

  start(): void {
    this.stopped = false;
    const tick = () => {
      this.running = this.tryAcquireOrRenew()
        .catch((err: unknown) => {
          this.log.warn('lease update failed', { lease: this.opts.name, error: errText(err) });
          if (this.leader && performance.now() - this.lastRenew > this.duration) this.setLeader(false);
        })
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.retry);
        });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    if (!this.leader) return;
    try {
      const lease = await this.api.readNamespacedLease({ name: this.opts.name, namespace: this.opts.namespace });
      if (lease.spec?.holderIdentity === this.opts.identity) {
        lease.spec.holderIdentity = undefined;
        lease.spec.leaseDurationSeconds = 1;
        await this.api.replaceNamespacedLease({ name: this.opts.name, namespace: this.opts.namespace, body: lease });
      }
    } catch (err) {
      this.log.warn('lease release failed', { lease: this.opts.name, error: errText(err) });
    }
    this.setLeader(false);
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const { name, namespace, identity } = this.opts;
    // A renewal counts from before it is sent: the API server may hold it before the answer comes.
    const started = performance.now();
    // Lease times are MicroTime: the API server refuses anything but six fractional digits,
    // which a plain Date (three) does not give.
    const now = new V1MicroTime();
    const spec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.max(1, Math.round(this.duration / 1000)),
      renewTime: now,
    };
    let lease: V1Lease | undefined;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (codeOf(err) !== 404) throw err;
    }
    if (!lease) {
      try {
        const created = { ...spec, acquireTime: now, leaseTransitions: 0 };
        await this.api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec: created } });
        this.renewed(created, started);
      } catch (err) {
        if (codeOf(err) !== 409) throw err;
        this.setLeader(false);
      }
      return;
    }
    const holder = lease.spec?.holderIdentity;
    const record = recordOf(lease.spec);
    if (record !== this.observed) [this.observed, this.observedAt] = [record, performance.now()];
    const validFor = (lease.spec?.leaseDurationSeconds ?? 15) * 1000;
    const expired = !holder || this.observedAt + validFor < performance.now();
    if (holder !== identity && !expired) {
      this.setLeader(false);
      return;
    }
    const takingOver = holder !== identity;
    lease.spec = {
      ...lease.spec,
      ...spec,
      ...(takingOver ? { acquireTime: now, leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + 1 } : {}),
    };
    try {
      await this.api.replaceNamespacedLease({ name, namespace, body: lease });
      this.renewed(lease.spec, started);
    } catch (err) {
      if (codeOf(err) !== 409) throw err;
      // Someone else wrote first; we stay leader only while our last renewal is still valid.
      if (this.leader && performance.now() - this.lastRenew > this.duration) this.setLeader(false);
      else if (!this.leader) this.setLeader(false);
    }
  }

  private renewed(spec: V1Lease['spec'], at: number): void {
    this.lastRenew = at;
    [this.observed, this.observedAt] = [recordOf(spec), at];
    this.setLeader(true);
  }

  private setLeader(v: boolean) {
    if (v === this.leader) return;
    this.leader = v;
    this.log.info(v ? 'became leader' : 'lost leadership', { lease: `${this.opts.namespace}/${this.opts.name}`, identity: this.opts.identity });
    if (v) this.opts.onStartedLeading?.();
    else this.opts.onStoppedLeading?.();
  }
}

/** The lease's record, compared as client-go compares it: any change to it is the holder alive. */
function recordOf(spec: V1Lease['spec']): string {
  return JSON.stringify([spec?.holderIdentity, timeOf(spec?.renewTime), timeOf(spec?.acquireTime), spec?.leaseDurationSeconds, spec?.leaseTransitions]);
}

function timeOf(t: unknown): number | string | undefined {
  if (t instanceof Date) return t.getTime();
  return typeof t === 'string' ? t : undefined;
}

export function codeOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e?.code === 'number') return e.code;
  if (typeof e?.statusCode === 'number') return e.statusCode;
  return undefined;
}

export function errText(err: unknown): string {
  const e = err as { code?: number; body?: unknown; message?: string };
  if (typeof e?.code === 'number' && e.body) {
    const body = typeof e.body === 'string' ? e.body : JSON.stringify(e.body);
    const msg = /"message":"([^"]*)"/.exec(body)?.[1];
    return `HTTP ${e.code}${msg ? `: ${msg}` : ''}`;
  }
  return e?.message ?? String(err);
}
