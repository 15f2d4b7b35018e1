import type { Registry } from 'prom-client';
import { SeriesTree, type LabelValues } from './series.js';

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
 * several times per request). A series is found by its label values (SeriesTree); it renders the
 * same exposition.
 */
export class KeyedCounter<N extends readonly string[]> {
  private readonly series: SeriesTree<N, CounterSeries>;
  readonly name: string;
  readonly help: string;
  readonly type = 'counter';
  readonly aggregator = 'sum';

  constructor(registry: Registry, o: { name: string; help: string; labelNames: N }) {
    this.name = o.name;
    this.help = o.help;
    this.series = new SeriesTree(o.labelNames, (labels) => new CounterSeries(labels));
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The series of these label values, in the declared order of the label names. */
  at(values: LabelValues<N>): CounterSeries {
    return this.series.at(values);
  }

  /** Off the request path: the series of these labels. */
  inc(labels: Readonly<Record<N[number], string>>, by = 1): void {
    this.series.of(labels).inc(by);
  }

  reset(): void {
    this.series.clear();
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: { labels: Record<string, string>; value: number }[] } {
    const values = this.series.all.map((s) => ({ labels: s.labels, value: s.value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
