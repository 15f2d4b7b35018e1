import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { Charged } from './books.js';

/** One scenario's measurements (milliseconds, requests per second). */
export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  ttfb50: number;
  ttfb99: number;
  /** How many requests of the call, warm-up included, a metered target may have charged. */
  charged: Charged;
}

export interface LoadOptions {
  url: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
}

function pct(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Closed-loop load: `connections` workers on a keep-alive undici Pool, each sending the next
 * request when its previous answer has been read to the end. Latency is until the last byte,
 * time to first byte until the first body chunk.
 */
export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const pool = new Pool(o.url, { connections: o.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const body = Buffer.from(o.body);
  const headers = { ...o.headers, 'content-type': 'application/json', 'content-length': String(body.length) };
  const lat: number[] = [];
  const ttfb: number[] = [];
  let errors = 0;
  // Warm-up included: what the target may have charged.
  let answered = 0;
  let failed = 0;
  let recording = false;
  let stop = false;

  const worker = async () => {
    while (!stop) {
      const t0 = performance.now();
      let first = 0;
      try {
        const res = await pool.request({ method: 'POST', path: o.path, headers, body });
        for await (const _chunk of res.body) if (first === 0) first = performance.now();
        if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
      } catch {
        failed++;
        if (recording) errors++;
        continue;
      }
      answered++;
      if (!recording) continue;
      const end = performance.now();
      lat.push(end - t0);
      ttfb.push((first || end) - t0);
    }
  };
  const workers = Array.from({ length: o.connections }, worker);
  await new Promise((r) => setTimeout(r, o.warmupMs));
  recording = true;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, o.durationMs));
  recording = false;
  const seconds = (performance.now() - started) / 1000;
  stop = true;
  await Promise.all(workers);
  await pool.close();
  const l = Float64Array.from(lat).sort();
  const t = Float64Array.from(ttfb).sort();
  return {
    requests: l.length,
    errors,
    seconds,
    rps: l.length / seconds,
    p50: pct(l, 50),
    p99: pct(l, 99),
    ttfb50: pct(t, 50),
    ttfb99: pct(t, 99),
    // Every worker read its last answer before it stopped: none was left unanswered.
    charged: { least: answered, most: answered + failed },
  };
}
