/** A series' label values, one per label name, in the names' declared order. */
export type LabelValues<N extends readonly string[]> = { readonly [K in keyof N]: string };

/**
 * The series of a metric, found by their label values through one Map per label. The values a
 * request brings are strings the config or the code already holds, and V8 keeps a string's hash
 * once computed, so a lookup hashes and copies nothing. A key joined from the values per request
 * was a new string to flatten and hash at every lookup: about 6.5k instructions of a chat
 * request's 370k (callgrind, bench/RESULTS.md "Hot path work").
 */
export class SeriesTree<N extends readonly string[], S> {
  private readonly root = new Map<string, unknown>();
  /** Every series in the order it was created: the exposition's order. */
  readonly all: S[] = [];

  constructor(
    readonly labelNames: N,
    private readonly create: (labels: Readonly<Record<N[number], string>>) => S,
  ) {
    if (labelNames.length === 0) throw new Error('a keyed metric needs at least one label');
  }

  at(values: LabelValues<N>): S {
    const last = this.labelNames.length - 1;
    let node = this.root;
    for (let i = 0; i < last; i++) {
      let next = node.get(values[i]!) as Map<string, unknown> | undefined;
      if (next === undefined) {
        next = new Map();
        node.set(values[i]!, next);
      }
      node = next;
    }
    let series = node.get(values[last]!) as S | undefined;
    if (series === undefined) {
      const labels: Record<string, string> = {};
      for (let i = 0; i <= last; i++) labels[this.labelNames[i]!] = values[i]!;
      series = this.create(labels as Record<N[number], string>);
      node.set(values[last]!, series);
      this.all.push(series);
    }
    return series;
  }

  /** The series of these labels (off the request path: it reads them into values first). */
  of(labels: Readonly<Record<N[number], string>>): S {
    return this.at(this.labelNames.map((n: N[number]) => labels[n]) as unknown as LabelValues<N>);
  }

  clear(): void {
    this.root.clear();
    this.all.length = 0;
  }
}
