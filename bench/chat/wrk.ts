import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LoadOptions, LoadResult } from './load.js';

/**
 * Closed-loop load with wrk (Debian's `wrk`), when it is installed: a C load generator takes a
 * fraction of the CPU the Node one does, which matters when the two cores are shared by the load
 * generator, the target and the simulator. Latency is until the last byte; wrk has no time to
 * first byte (reported as NaN).
 */
export function wrkAvailable(): Promise<boolean> {
  return new Promise((resolve) => execFile('wrk', ['--version'], (err, stdout, stderr) => resolve(/^wrk /m.test(`${stdout}${stderr}`) || !err)));
}

export async function runWrk(o: LoadOptions): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-wrk-'));
  const script = join(dir, 'post.lua');
  const headers = Object.entries({ ...o.headers, 'content-type': 'application/json' })
    .map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
    .join('\n');
  writeFileSync(
    script,
    `wrk.method = "POST"\nwrk.body = ${JSON.stringify(o.body)}\n${headers}\n` +
      // Non-2xx answers count as errors, like the Node load generator.
      `local bad = 0\nresponse = function(status) if status ~= 200 then bad = bad + 1 end end\n`,
  );
  const run = (seconds: number) =>
    new Promise<string>((resolve, reject) =>
      execFile(
        'wrk',
        ['-t', '1', '-c', String(o.connections), '-d', `${seconds}s`, '--latency', '-s', script, `${o.url}${o.path}`],
        { timeout: (seconds + 30) * 1000 },
        (err, stdout) => (err ? reject(err) : resolve(stdout)),
      ),
    );
  const counts = (out: string) => {
    const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? NaN);
    const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    return {
      out,
      num,
      requests: num(/(\d+) requests in/),
      non2xx: num(/Non-2xx or 3xx responses: (\d+)/) || 0,
      sockErr: socketErrors ? socketErrors.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
    };
  };
  const warm = o.warmupMs > 0 ? counts(await run(Math.max(1, Math.round(o.warmupMs / 1000)))) : undefined;
  const main = counts(await run(Math.max(1, Math.round(o.durationMs / 1000))));
  const { out, num } = main;
  const msOf = (label: string) => {
    const m = new RegExp(`\\s${label}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  const seconds = Math.max(1, Math.round(o.durationMs / 1000));
  // wrk stops with a request in flight on each connection, and one that timed out may still be
  // answered: the target may have charged those too.
  const runs = warm ? [warm, main] : [main];
  const charged = {
    least: runs.reduce((n, r) => n + r.requests - r.non2xx, 0),
    most: runs.reduce((n, r) => n + r.requests + r.sockErr + o.connections, 0),
  };
  return {
    requests: main.requests,
    errors: main.non2xx + main.sockErr,
    seconds,
    rps: num(/Requests\/sec:\s+([\d.]+)/),
    p50: msOf('50'),
    p99: msOf('99'),
    ttfb50: NaN,
    ttfb99: NaN,
    charged,
  };
}
