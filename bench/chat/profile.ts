/**
 * `npm run bench:profile -- [postgres|postgres-commit|postgres-journal|pglite|no-billing|floor] [json|stream] [seconds]`:
 * where the gateway's CPU goes under load (floor: the bare Node proxy, to compare shares with).
 * The simulator and the gateway run in processes of their own; after a warm-up, the gateway's
 * profiler runs for the load window only (start-up excluded) and the profile is summarised: self
 * time by function, inclusive time of the project's functions, and self time by area (node
 * internals, undici, each project folder, GC). The raw profile is kept (open it in Chrome
 * DevTools or speedscope for a flame graph). The gateway runs compiled (as the image runs it);
 * BENCH_TSX=1 runs it through tsx (from the sources). BENCH_CONNECTIONS (default 50) sets the
 * load's connections. The profile is of the main thread only: the process's
 * CPU in /proc also counts V8's worker threads (garbage collection, compilation).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BENCH_KEY, chatBody } from './config.js';
import { runLoad } from './load.js';
import { startChild } from './process.js';
import { runWrk, wrkAvailable } from './wrk.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Where compiledServers() puts the build: its frames are named like the sources. */
const BUILD = 'node_modules/.cache/tollgate-bench/';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** The area a frame belongs to: a project folder (proxy/chat, kernel, ...), a package, or node. */
function area(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  url = url.replace(BUILD, '');
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  const rel = url.replace(/^file:\/\//, '').replace(ROOT, '');
  const parts = rel.split('/');
  return parts[0] === 'proxy' ? `proxy/${parts[1]}` : parts[0]!;
}

function frameKey(f: CallFrame): string {
  const rel = f.url
    .replace(/^file:\/\//, '')
    .replace(BUILD, '')
    .replace(ROOT, '');
  return `${f.functionName || '(anonymous)'} ${rel ? `${rel}:${f.lineNumber + 1}` : ''}`.trim();
}

export function summarise(p: CpuProfile, top = 25): string {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  const areas = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const us = p.timeDeltas[i + 1] ?? 0;
    const node = byId.get(p.samples[i]!)!;
    if (node.callFrame.functionName === '(idle)') continue;
    total += us;
    const key = frameKey(node.callFrame);
    self.set(key, (self.get(key) ?? 0) + us);
    const a = area(node.callFrame.url, node.callFrame.functionName);
    areas.set(a, (areas.get(a) ?? 0) + us);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      const k = frameKey(f);
      if (seen.has(k) || !/\/(proxy|kernel|api)\//.test(f.url)) continue;
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + us);
    }
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1)}%`;
  const table = (title: string, m: Map<string, number>, n: number) =>
    [
      `| ${title} | share of busy CPU |`,
      '|---|---:|',
      ...[...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, n)
        .map(([k, v]) => `| \`${k}\` | ${pct(v)} |`),
    ].join('\n');
  return [
    `Busy CPU sampled: ${(total / 1000).toFixed(0)} ms.`,
    '',
    table('area (self time)', areas, 20),
    '',
    table('function (self time)', self, top),
    '',
    table('project function (inclusive)', incl, top),
  ].join('\n');
}

async function main(): Promise<void> {
  const [target = 'postgres', mode = 'json', secondsArg = '8'] = process.argv.slice(2);
  const seconds = Number(secondsArg);
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-profile-'));
  const file = join(dir, `${target}-${mode}.cpuprofile`);
  const sim = await startChild(['sim']);
  const env: Record<string, string> = { BENCH_CPU_PROFILE: file };
  if (target === 'no-billing') env.BENCH_BILLING = 'none';
  // As `npm run bench` runs it: the quickstart's shape, PGlite in a data folder with the billing journal.
  if (target === 'pglite') env.BENCH_DATA = 'disk';
  if (target === 'postgres' || target === 'postgres-commit' || target === 'postgres-journal') {
    if (!process.env.DATABASE_URL) throw new Error(`${target}: set DATABASE_URL`);
    env.BENCH_DATABASE_URL = process.env.DATABASE_URL;
    // As the chart's `proxy.billingJournal` runs it: charges durable in the journal, PostgreSQL behind.
    if (target === 'postgres-journal') env.BENCH_JOURNAL = '1';
    // Each charge committed on the request's path (`proxy.billingJournal.table: false`); unset, the journal table.
    if (target === 'postgres-commit') env.TOLLGATE_BILLING_JOURNAL_TABLE = 'false';
  }
  // Compiled, as the image runs it; BENCH_TSX=1: through tsx, from the sources.
  // floor: the bare Node proxy the ratios are taken against, for comparing shares.
  const gw = await startChild([target === 'floor' ? 'floor' : 'gateway', sim.url], env, process.env.BENCH_TSX !== '1');
  try {
    const load = {
      url: gw.url,
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${BENCH_KEY}` },
      body: chatBody('sim-gpt', mode === 'stream'),
      connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
      warmupMs: 2000,
      durationMs: seconds * 1000,
    };
    const run = (await wrkAvailable()) ? runWrk : runLoad;
    await run({ ...load, durationMs: load.warmupMs, warmupMs: 0 });
    gw.child.kill('SIGUSR2');
    const r = await run({ ...load, warmupMs: 0 });
    process.stdout.write(`${target} ${mode}: ${r.rps.toFixed(0)} req/s, ${r.errors} errors\n`);
  } finally {
    const exited = new Promise((resolve) => gw.child.once('exit', resolve));
    gw.child.kill('SIGTERM');
    await exited;
    sim.child.kill('SIGTERM');
  }
  process.stdout.write(`${summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile)}\n\nProfile: ${file}\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
