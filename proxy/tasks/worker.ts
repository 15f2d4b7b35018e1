import type { Logger } from '../../kernel/log.js';
import type { Store } from '../store/index.js';
import { WorkerLoop } from '../webhooks/loop.js';
import type { TaskEngine } from './engine.js';
import { claimTasks, nextTaskDueMs, releaseLeases } from './store.js';
import type { TaskRow } from './types.js';

/**
 * This replica's task worker: claims due tasks (FOR UPDATE SKIP LOCKED, leased to `owner`) and
 * runs each a step further. Stopping gives the leases back so a restart or another replica takes
 * the tasks up without waiting for the leases to run out.
 */
export function createTaskWorker(o: {
  engine: TaskEngine;
  store: Store;
  log: Logger;
  owner: string;
  leaseMs: number;
  intervalMs: number;
  concurrency: number;
}) {
  const loop = new WorkerLoop<TaskRow>({
    name: 'task worker',
    intervalMs: o.intervalMs,
    capacity: o.concurrency,
    log: o.log,
    claim: (n) => claimTasks(o.store, o.owner, n, o.leaseMs),
    nextDueMs: () => nextTaskDueMs(o.store),
    run: (task, signal) => o.engine.run(task, signal),
  });
  return {
    start: () => loop.start(),
    wake: () => loop.wake(),
    async stop(graceMs: number) {
      await loop.stop(graceMs);
      await releaseLeases(o.store, o.owner).catch((err: Error) => o.log.warn('could not release task leases', { error: err.message }));
    },
  };
}
