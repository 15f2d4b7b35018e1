/** One sample of the Prometheus text exposition format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the text format (what /metrics serves) into samples; comments are skipped. */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

export async function scrape(adminUrl: string): Promise<Sample[]> {
  const res = await fetch(`${adminUrl}/metrics`);
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}

/** The sum of the samples of `name` whose labels include `match`. */
export function total(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
}

/** Each series as `name{k="v",...}`, labels sorted. */
export function seriesOf(samples: Sample[]): Set<string> {
  return new Set(
    samples.map(
      (s) =>
        `${s.name}{${Object.entries(s.labels)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([k, v]) => `${k}="${v}"`)
          .join(',')}}`,
    ),
  );
}

export interface FrontCounts {
  connections: number;
  method: number;
  route: number;
  head: number;
  closing: number;
}

/** The lean front's counters: API connections it read, and those it handed to node:http, by reason. */
export async function frontCounts(adminUrl: string): Promise<FrontCounts> {
  const s = await scrape(adminUrl);
  const handoffs = (reason: string) => total(s, 'tollgate_http_front_handoffs_total', { reason });
  return {
    connections: total(s, 'tollgate_http_front_connections_total'),
    method: handoffs('method'),
    route: handoffs('route'),
    head: handoffs('head'),
    closing: handoffs('closing'),
  };
}
