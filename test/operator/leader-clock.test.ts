import { CoordinationV1Api, V1MicroTime } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaderElector } from '../../operator/leader.js';
import { NS, memoryLog, startCluster, waitFor, type Cluster } from './harness.js';

/**
 * A Lease's renewTime is the holder's wall clock, not ours. Nodes' clocks differ (and step), so a
 * standby judges a lease by whether it keeps changing, as client-go does, not by comparing that
 * time with its own clock.
 */

const HOUR = 3_600_000;
let cluster: Cluster;
let api: CoordinationV1Api;

beforeAll(async () => {
  cluster = await startCluster({ crds: false });
  api = cluster.kc.makeApiClient(CoordinationV1Api);
});
afterAll(async () => {
  await cluster?.close();
});

/** Another replica holding `name`, its clock an hour behind ours; it renews every 200 ms until stopped. */
async function holderBehind(name: string) {
  const spec = () => ({ holderIdentity: 'op-behind', leaseDurationSeconds: 2, renewTime: new V1MicroTime(Date.now() - HOUR) });
  await api.createNamespacedLease({
    namespace: NS,
    body: { metadata: { name, namespace: NS }, spec: { ...spec(), acquireTime: new V1MicroTime(Date.now() - HOUR), leaseTransitions: 0 } },
  });
  let renewedAt = performance.now();
  const timer = setInterval(() => {
    void api
      .readNamespacedLease({ name, namespace: NS })
      .then(async (lease) => {
        lease.spec = { ...lease.spec, ...spec() };
        await api.replaceNamespacedLease({ name, namespace: NS, body: lease });
        renewedAt = performance.now();
      })
      .catch(() => {}); // a renewal that failed is one the standby does not see: the test's assertions tell
  }, 200);
  return {
    stop: () => clearInterval(timer),
    renewedAt: () => renewedAt,
  };
}

describe('leader election across clocks', () => {
  it('a holder whose clock is an hour behind keeps its lease while it renews; once it stops, the standby takes over a lease duration later', async () => {
    const holder = await holderBehind('clock-behind');
    const log = memoryLog();
    const standby = new LeaderElector(api, { namespace: NS, name: 'clock-behind', identity: 'op-standby', leaseDurationMs: 2_000, retryMs: 100 }, log);
    let ledWhileRenewed = false;
    const watch = setInterval(() => (ledWhileRenewed ||= standby.isLeader()), 10);
    standby.start();
    try {
      // Twice the lease's duration of renewals an hour old by our clock.
      await new Promise((r) => setTimeout(r, 4_000));
      expect(ledWhileRenewed).toBe(false);
      expect(cluster.api.get('coordination.k8s.io/v1', 'leases', NS, 'clock-behind')?.spec.holderIdentity).toBe('op-behind');

      holder.stop();
      await new Promise((r) => setTimeout(r, 300)); // a renewal in flight lands
      const lastRenewal = holder.renewedAt();
      await waitFor(() => standby.isLeader(), 'the standby leading', 6_000);
      // Not before the lease's duration had passed unchanged, and with one retry period of slack.
      const after = performance.now() - lastRenewal;
      expect(after).toBeGreaterThanOrEqual(1_900);
      expect(after).toBeLessThan(4_000);
      expect(cluster.api.get('coordination.k8s.io/v1', 'leases', NS, 'clock-behind')?.spec).toMatchObject({
        holderIdentity: 'op-standby',
        leaseTransitions: 1,
      });
    } finally {
      clearInterval(watch);
      holder.stop();
      await standby.stop();
    }
  });

  it('a lease its holder released is taken at once, whatever its renewTime says', async () => {
    await api.createNamespacedLease({
      namespace: NS,
      body: { metadata: { name: 'released', namespace: NS }, spec: { leaseDurationSeconds: 1, renewTime: new V1MicroTime(Date.now() + HOUR) } },
    });
    const standby = new LeaderElector(api, { namespace: NS, name: 'released', identity: 'op-next', leaseDurationMs: 15_000, retryMs: 100 }, memoryLog());
    const t0 = performance.now();
    standby.start();
    try {
      await waitFor(() => standby.isLeader(), 'the standby leading', 5_000);
      expect(performance.now() - t0).toBeLessThan(2_000);
    } finally {
      await standby.stop();
    }
  });
});
