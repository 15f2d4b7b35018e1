/**
 * `npm run bench:idle [-- --no-write]`: what an idle gateway spends. Each target is the bench's
 * compiled gateway (bench/chat/servers.ts, on the image's Node as `npm run bench` runs it) beside
 * the simulator in its own process: the quickstart's shape (PGlite on a data folder in its worker
 * thread, the billing journal) and, when DATABASE_URL is set, metered billing on PostgreSQL. No
 * request is sent. After BENCH_IDLE_SETTLE_MS (default 5000) the gateway's CPU is read per thread
 * from /proc over BENCH_IDLE_SECONDS (default 60), in BENCH_IDLE_ROUNDS rounds (default 2), the
 * targets taking turns, each round a fresh process. PostgreSQL's own server is not counted (other
 * clients of this machine's server would be). Rewrites the "## Idle" section of bench/RESULTS.md.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { startChild } from './chat/process.js';
import { envNumber } from './env.js';
import { measuredBy, median, publish, runAsCommand } from './results.js';

const SECTION = '## Idle';
const settleMs = envNumber('BENCH_IDLE_SETTLE_MS', 5000);
const seconds = envNumber('BENCH_IDLE_SECONDS', 60);
const rounds = envNumber('BENCH_IDLE_ROUNDS', 2);

/** Thread groups by the names Node and V8 give their threads (/proc/PID/task/TID/comm). */
const GROUPS: [string, RegExp][] = [
  ['main', /^(MainThread|node)$/],
  ['V8 platform', /^V8Worker/],
  ['worker threads', /^WorkerThread/],
  ['libuv pool', /^libuv-worker/],
];
const OTHER = 'other';

/** CPU clock ticks (user + system) per thread group of the process so far. */
function threadTicks(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    const group = GROUPS.find(([, re]) => re.test(name))?.[0] ?? OTHER;
    out.set(group, (out.get(group) ?? 0) + Number(f[11]) + Number(f[12]));
  }
  return out;
}

interface Target {
  name: string;
  title: string;
  env: Record<string, string>;
}

/** Percent of one core per thread group over the window (100 ticks a second make 100%). */
async function measure(t: Target): Promise<Map<string, number>> {
  const sim = await startChild(['sim'], {}, true);
  const gw = await startChild(['gateway', sim.url], t.env, true);
  try {
    await new Promise((r) => setTimeout(r, settleMs));
    const before = threadTicks(gw.child.pid!);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const after = threadTicks(gw.child.pid!);
    const pct = new Map<string, number>();
    for (const [group, ticks] of after) pct.set(group, (ticks - (before.get(group) ?? 0)) / seconds);
    return pct;
  } finally {
    for (const c of [gw.child, sim.child]) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    }
  }
}

const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
const pct = (x: number) => `${x.toFixed(2)}%`;

async function main(): Promise<void> {
  const targets: Target[] = [
    { name: 'quickstart', title: 'quickstart shape (PGlite on a data folder in its worker thread, the billing journal)', env: { BENCH_DATA: 'disk' } },
  ];
  if (process.env.DATABASE_URL)
    targets.push({ name: 'postgres', title: 'metered billing on PostgreSQL', env: { BENCH_DATABASE_URL: process.env.DATABASE_URL } });
  const load0 = loadavg()[0]!;
  const results = new Map<string, Map<string, number>[]>(targets.map((t) => [t.name, []]));
  for (let round = 1; round <= rounds; round++)
    for (const t of targets) {
      const m = await measure(t);
      results.get(t.name)!.push(m);
      process.stderr.write(`round ${round} ${t.name}: ${pct(total(m))} of a core\n`);
    }
  const groups = [...GROUPS.map(([g]) => g), OTHER];
  const rows = targets.map((t) => {
    const ms = results.get(t.name)!;
    const byGroup = groups
      .map((g) => [g, median(ms.map((m) => m.get(g) ?? 0))] as const)
      .filter(([, v]) => v > 0)
      .map(([g, v]) => `${g} ${pct(v)}`)
      .join(', ');
    return `| ${t.title} | ${ms.map((m) => pct(total(m))).join(', ')} | ${pct(median(ms.map(total)))} | ${byGroup} |`;
  });
  const section = [
    SECTION,
    '',
    `${measuredBy('npm run bench:idle')}; load average ${load0.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end.`,
    `The bench's compiled gateway beside the simulator (on ${process.env.BENCH_NODE === 'current' ? `Node ${process.version}` : "the image's Node, 24"}), no request sent: its CPU per thread from /proc over ${seconds} s, ${settleMs / 1000} s after start, in ${rounds} rounds (a fresh process each, the targets taking turns). PostgreSQL's server is not counted.`,
    '',
    '| gateway | CPU idle, each round (% of a core) | median | by thread (median) |',
    '|---|---|---:|---|',
    ...rows,
    '',
    'What an idle gateway still does, and what was taken out: "Idle: what was changed", below (figures there from before this benchmark existed, by the same method).',
    '',
  ].join('\n');
  publish(SECTION, section);
}

runAsCommand(import.meta.url, main);
