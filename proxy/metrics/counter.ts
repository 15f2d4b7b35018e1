import type { Registry } from 'prom-client';

/** One label set of a counter. */
export class CounterSeries {
  value = 0;
  constructor(readonly labels: Readonly<Record<string, string>>) {}
  inc(by = 1): void {
    if (Number.isFinite(by) && by > 0) this.value += by;
  }
}

/**
 * A Prometheus counter for the request path, for the reason KeyedHistogram exists: prom-client's
 * Counter validates and hashes its labels on every inc (about 1-2 µs with three to five labels,
 * several times per request). A series is found by a key the caller builds from the label values
 * (or by inc(labels), which joins them in the declared order); it renders the same exposition.
 */
export class KeyedCounter<L extends string> {
  private readonly series = new Map<string, CounterSeries>();
  readonly name: string;
  readonly help: string;
  readonly type = 'counter';
  readonly aggregator = 'sum';
  private readonly labelNames: readonly L[];

  constructor(registry: Registry, o: { name: string; help: string; labelNames: readonly L[] }) {
    this.name = o.name;
    this.help = o.help;
    this.labelNames = o.labelNames;
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The series of `key`, created with `labels()` the first time the key is seen. */
  at(key: string, labels: () => Record<L, string>): CounterSeries {
    let s = this.series.get(key);
    if (!s) {
      s = new CounterSeries(labels());
      this.series.set(key, s);
    }
    return s;
  }

  /** Off the request path: the series of these label values (NUL joins them: it is in no label value). */
  inc(labels: Record<L, string>, by = 1): void {
    let key = '';
    for (const n of this.labelNames) key += `${labels[n]}\0`;
    this.at(key, () => labels).inc(by);
  }

  reset(): void {
    this.series.clear();
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: { labels: Record<string, string>; value: number }[] } {
    const values = [...this.series.values()].map((s) => ({ labels: s.labels, value: s.value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
