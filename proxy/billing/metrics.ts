import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** What the billing engine reports. Labels never carry keys or accounts. */
export interface BillingMetrics {
  refusals: Counter<'reason'>;
  commits: Histogram;
  captures: Counter;
  topups: Counter<'when'>;
  swept: Counter;
  journalPending: Gauge;
}

export function billingMetrics(registry: Registry): BillingMetrics {
  return {
    refusals: new Counter({
      name: 'tollgate_billing_refusals_total',
      help: 'Chat requests refused with 402, by reason (insufficient_credits, spend_limit_reached)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    commits: new Histogram({
      name: 'tollgate_billing_commit_seconds',
      help: 'Duration of group commits (captures and usage records of settled requests)',
      buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5],
      registers: [registry],
    }),
    captures: new Counter({ name: 'tollgate_billing_captures_total', help: 'Settled chat requests written by group commits', registers: [registry] }),
    topups: new Counter({
      name: 'tollgate_billing_lease_topups_total',
      help: 'Lease top-ups (store transactions): ahead of need, in the background, or on_request, on the path of a request that did not fit',
      labelNames: ['when'] as const,
      registers: [registry],
    }),
    swept: new Counter({
      name: 'tollgate_billing_swept_holds_total',
      help: "Expired request and lease holds released by this replica's sweeper",
      registers: [registry],
    }),
    journalPending: new Gauge({
      name: 'tollgate_billing_journal_pending',
      help: 'Charges durable in the billing journal and not yet in the store (grows while the store is unreachable)',
      registers: [registry],
    }),
  };
}
