import type { Store } from '../store/index.js';
import { release } from './ledger.js';

/**
 * Releases request and lease holds past their deadline: what a replica that died left behind
 * (a live replica keeps pushing its leases' deadlines). Every replica runs it; rows are claimed
 * with FOR UPDATE SKIP LOCKED so two sweepers never take the same hold, and the release row's
 * unique (operation_id, kind) makes a second release of one hold impossible anyway. Task holds
 * are the task engine's and are left alone. Returns how many holds were released.
 */
export async function sweepExpiredHolds(store: Store, limit = 100): Promise<number> {
  return store.tx(async (q) => {
    const r = await q.query<{ hold_id: string }>(
      `SELECT hold_id FROM holds WHERE purpose IN ('request', 'lease') AND expires_at < now()
        ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [limit],
    );
    let n = 0;
    for (const { hold_id } of r.rows) {
      if ((await release(q, { holdId: hold_id, meta: { reason: 'expired' } })) !== null) n++;
    }
    return n;
  });
}
