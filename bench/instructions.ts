/**
 * `npm run bench:instructions [-- --no-write] [target...]`: the user-space instructions each
 * target executes per chat request, counted by valgrind (callgrind), and its write system calls
 * from /proc/PID/io. Unlike CPU time these counts do not move with how busy this machine is or
 * how warm its caches are, so a change of a few microseconds per request shows here when the CPU
 * figures of `npm run bench` cannot tell it from the machine's spread.
 *
 * Each target (floor, no-billing, postgres, postgres-journal, pglite, as in `npm run bench`; the
 * postgres ones need DATABASE_URL; floor-dispatch and floor-net, the floor taken apart, only when
 * named) is the bench's compiled server on the image's Node, started
 * under `valgrind --tool=callgrind --instr-atstart=no`: it runs uninstrumented through start-up
 * and BENCH_IR_WARMUP requests (default 30,000), then instrumented, first BENCH_IR_IDLE_SECONDS
 * (default 60) with no request, then BENCH_IR_WINDOWS windows (default 5) of BENCH_IR_REQUESTS
 * requests each (default 1,000), every window dumped on its own. Requests go one at a time
 * (BENCH_CONNECTIONS to change it) to the simulator in its own process. Rewrites the
 * "## Instructions per request" section of bench/RESULTS.md.
 *
 * Under valgrind a request takes 10-50 times as long, so whatever runs by the clock weighs that
 * much more per request. Two corrections: the idle window's rate (timers, the store's upkeep) is
 * taken out of each window in proportion to its length; and V8's memory reducer, which starts
 * full garbage collections when the allocation rate per millisecond looks low (it always does
 * under valgrind), is turned off (--no-memory-reducer; under load it does not run natively).
 *
 * What the counts leave out: the kernel's work (a write system call's loopback delivery, a large
 * share of the floor's CPU) and how fast instructions run (cache misses, a vCPU woken from halt).
 * They are a yardstick for the work the process's own code does, beside the CPU figures.
 *
 * BENCH_IR_KEEP=1 keeps the dumps, and a copy of each (DUMP.named) in which JIT code carries the
 * JavaScript function's name from V8's perf map (the target then runs with --perf-basic-prof):
 * `callgrind_annotate --tree=caller DUMP.named` tells which function calls a builtin or the
 * runtime. BENCH_NODE_FLAGS adds Node or V8 flags to the target's command line.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { BENCH_KEY, chatBody } from './chat/config.js';
import { compiledServers, imageNode, startChild, writeCalls } from './chat/process.js';
import { envNumber } from './env.js';
import { measuredBy, median, publish, runAsCommand } from './results.js';

const run = promisify(execFile);
const SECTION = '## Instructions per request';
const warmup = envNumber('BENCH_IR_WARMUP', 30_000);
const windows = envNumber('BENCH_IR_WINDOWS', 5);
const perWindow = envNumber('BENCH_IR_REQUESTS', 1_000);
const connections = envNumber('BENCH_CONNECTIONS', 1);
const idleSeconds = envNumber('BENCH_IR_IDLE_SECONDS', 60);
const keep = process.env.BENCH_IR_KEEP === '1';
const modes = (process.env.BENCH_IR_MODES ?? 'json,stream').split(',').filter((m): m is 'json' | 'stream' => m === 'json' || m === 'stream');

interface Target {
  name: string;
  env: Record<string, string>;
  optIn?: true;
}

const TARGETS: Target[] = [
  { name: 'floor', env: {} },
  // Only when named: the floor taken apart (bench/chat/floor-parts.ts).
  { name: 'floor-dispatch', env: { BENCH_FLOOR_PART: 'dispatch' }, optIn: true },
  { name: 'floor-net', env: { BENCH_FLOOR_PART: 'net' }, optIn: true },
  { name: 'no-billing', env: { BENCH_BILLING: 'none' } },
  { name: 'postgres', env: { BENCH_DATABASE_URL: process.env.DATABASE_URL ?? '' } },
  { name: 'postgres-journal', env: { BENCH_DATABASE_URL: process.env.DATABASE_URL ?? '', BENCH_JOURNAL: '1' } },
  { name: 'pglite', env: { BENCH_DATA: 'disk' } },
  // Only when named: the gateway on node:http's front (TOLLGATE_HTTP_FRONT=node; the default is
  // the lean front, proxy/front/lean.ts).
  { name: 'no-billing-node', env: { BENCH_BILLING: 'none', TOLLGATE_HTTP_FRONT: 'node' }, optIn: true },
  { name: 'postgres-node', env: { BENCH_DATABASE_URL: process.env.DATABASE_URL ?? '', TOLLGATE_HTTP_FRONT: 'node' }, optIn: true },
];

const GC = 'garbage collection';
const COMPILERS = 'V8 compilers';

/** Where a function's instructions go, by the symbol callgrind found for it (JIT code has none). */
const AREAS: [string, RegExp][] = [
  [COMPILERS, /v8::internal::(compiler|maglev|baseline|wasm::|Compiler|OptimizingCompile|Parser|Scanner|PreParser|AstNode|Bytecode)|turboshaft|liftoff/i],
  [
    GC,
    // A scavenge's root visit (the startup and shared object caches) is V8's C++, named apart from the heap's.
    /v8::internal::(Scaveng|MarkCompact|Heap|Sweeper|Marking|Evacuat|MemoryChunk|MemoryAllocator|ConcurrentMarking|MinorM|IncrementalMarking|PagedSpace|Page::|Remembered|SlotSet|ObjectVisitor|RootScavengeVisitor|SerializerDeserializer::Iterate|\(anonymous namespace\)::IterateObjectCache)|heap::base|cppgc/,
  ],
  ['JavaScript (JIT code and builtins)', /^(\?\?\?:0x|\?\?\?:Builtins_|Builtins_)/],
  ['libc', /libc\.so|ld-linux/],
];
const OTHER = 'V8 runtime, Node and libuv (C++)';

interface Window {
  instructions: number;
  areas: Map<string, number>;
  writes: number;
  /** What the process ran on its own during the window (the idle rate × its length), taken out of `instructions`. */
  idle: number;
}

/** A callgrind dump's total and its instructions by area (callgrind_annotate's self costs). */
async function readDump(file: string): Promise<{ instructions: number; areas: Map<string, number> }> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=no', '--threshold=100', file], { maxBuffer: 1 << 28 });
  const areas = new Map<string, number>();
  let instructions = 0;
  for (const line of stdout.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!m) continue;
    const n = Number(m[1]!.replace(/,/g, ''));
    if (m[2]!.includes('PROGRAM TOTALS')) {
      instructions = n;
      continue;
    }
    const area = AREAS.find(([, re]) => re.test(m[2]!))?.[0] ?? OTHER;
    areas.set(area, (areas.get(area) ?? 0) + n);
  }
  return { instructions, areas };
}

/** `count` chat requests over `connections` keep-alive connections, each answer read to its end. */
async function send(url: string, mode: 'json' | 'stream', count: number): Promise<void> {
  const pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const body = Buffer.from(chatBody('sim-gpt', mode === 'stream'));
  const headers = { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json', 'content-length': String(body.length) };
  let left = count;
  const worker = async () => {
    while (left > 0) {
      left--;
      const res = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers, body });
      await res.body.arrayBuffer();
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: connections }, worker));
  } finally {
    await pool.close();
  }
}

async function measure(t: Target, mode: 'json' | 'stream', simUrl: string): Promise<Window[]> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-ir-'));
  const out = join(dir, 'callgrind.out');
  const args = [
    '--tool=callgrind',
    '--instr-atstart=no',
    '--fair-sched=yes',
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}`,
    await imageNode(),
    '--no-memory-reducer',
    // V8 also shrinks the young generation when the allocation rate per millisecond looks low:
    // under valgrind it scavenged every 20-30 requests in some runs and every 500-1,000 in others;
    // natively (--trace-gc, 20,000 requests at 1 and at 50 connections) it grows to its largest
    // and scavenges every ~600.
    '--min-semi-space-size=16',
    // --perf-basic-prof also writes V8's code log, by default as isolate-*-v8.log in the working directory.
    ...(keep ? ['--perf-basic-prof', '--no-logfile-per-isolate', `--logfile=${join(dir, 'v8.log')}`] : []),
    ...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean),
    compiledServers(),
  ];
  const child: ChildProcess = spawn('valgrind', [...args, t.name.startsWith('floor') ? 'floor' : 'gateway', simUrl], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...t.env },
  });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => void (log = (log + d.toString()).slice(-4000)));
  const exited = new Promise<void>((r) => {
    child.once('exit', () => r());
    child.once('error', () => r());
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let buf = '';
      child.stdout!.on('data', (d: Buffer) => {
        buf += d.toString();
        const nl = buf.indexOf('\n');
        if (nl !== -1) resolve((JSON.parse(buf.slice(0, nl)) as { url: string }).url);
      });
      child.once('exit', (code) => reject(new Error(`${t.name} exited with ${code}:\n${log}`)));
      child.once('error', (err) => reject(new Error(`valgrind (Debian package valgrind) could not be started: ${err.message}`)));
    });
    await send(url, mode, warmup);
    const pid = String(child.pid);
    // The idle rate first: what the process runs on its own (timers, the store's upkeep) per
    // second, taken out of each window below in proportion to its length.
    let dumps = 0;
    const counted = async (during: () => Promise<unknown>) => {
      const t0 = performance.now();
      await during();
      await run('callgrind_control', ['-d', pid]);
      return { seconds: (performance.now() - t0) / 1000, ...(await readDump(`${out}.${++dumps}`)) };
    };
    await run('callgrind_control', ['-i', 'on', pid]);
    const idle = await counted(() => new Promise((r) => setTimeout(r, idleSeconds * 1000)));
    const result: Window[] = [];
    for (let w = 1; w <= windows; w++) {
      const writes0 = writeCalls(child.pid!);
      let writes = 0;
      const c = await counted(async () => {
        await send(url, mode, perWindow);
        writes = writeCalls(child.pid!) - writes0;
      });
      const share = c.seconds / idle.seconds;
      const areas = new Map([...c.areas].map(([a, n]) => [a, n - share * (idle.areas.get(a) ?? 0)]));
      result.push({ instructions: c.instructions - share * idle.instructions, areas, writes, idle: share * idle.instructions });
      const each = [...areas].map(([a, n]) => `${a} ${kilo(n / perWindow)}`).join(', ');
      process.stderr.write(
        `  ${t.name} ${mode} window ${w}: ${kilo((c.instructions - share * idle.instructions) / perWindow)} per request (${each}), idle taken out ${kilo((share * idle.instructions) / perWindow)}\n`,
      );
    }
    return result;
  } finally {
    // SIGTERM, so that a PostgreSQL target drops its schema; valgrind may take a while to exit.
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    await exited;
    clearTimeout(killer);
    if (keep) {
      const map = `/tmp/perf-${child.pid}.map`;
      for (let d = 1; existsSync(`${out}.${d}`); d++) nameJitCode(map, `${out}.${d}`);
      rmSync(map, { force: true });
      process.stderr.write(`${t.name} ${mode}: dumps kept in ${dir}, and as DUMP.named with JIT code named\n`);
    } else rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A copy of a callgrind dump in which JIT code, which callgrind knows only by address, is named
 * after the entry of V8's perf map (--perf-basic-prof) that holds the address.
 */
function nameJitCode(map: string, dump: string): void {
  if (!existsSync(map)) return;
  const code = readFileSync(map, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
      return m ? [{ start: parseInt(m[1]!, 16), size: parseInt(m[2]!, 16), name: m[3]!.replace(/\s+/g, '_') }] : [];
    })
    .sort((a, b) => a.start - b.start);
  const at = (address: number) => {
    let lo = 0;
    let hi = code.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (code[mid]!.start <= address) lo = mid;
      else hi = mid - 1;
    }
    const c = code[lo];
    return c && c.start <= address && address < c.start + c.size ? c.name : undefined;
  };
  const named = readFileSync(dump, 'utf8').replace(/^(c?fn=\(\d+\)) 0x([0-9a-f]+)$/gm, (line, head: string, hex: string) => {
    const name = at(parseInt(hex, 16));
    return name ? `${head} ${name}` : line;
  });
  writeFileSync(`${dump}.named`, named);
}

const kilo = (n: number) => `${(n / 1000).toFixed(0)}k`;

async function main(): Promise<void> {
  const named = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const targets = TARGETS.filter((t) => (named.length ? named.includes(t.name) : !t.optIn)).filter((t) => {
    if (!t.name.startsWith('postgres') || process.env.DATABASE_URL) return true;
    process.stderr.write(`${t.name}: skipped (set DATABASE_URL)\n`);
    return false;
  });
  const sim = await startChild(['sim'], {}, true);
  const rows: string[] = [];
  const areaRows: string[] = [];
  try {
    for (const mode of modes) {
      let floor: number | undefined;
      for (const t of targets) {
        const ws = await measure(t, mode, sim.url);
        // V8's optimizing and garbage collection run in lumps (a full collection in one window of
        // five, compiling long after the warm-up): the first figure leaves them out, so that it
        // moves with the request's own work only; the whole count is in the next columns.
        const lumps = (w: Window) => (w.areas.get(COMPILERS) ?? 0) + (w.areas.get(GC) ?? 0);
        const per = ws.map((w) => (w.instructions - lumps(w)) / perWindow);
        const mid = median(per);
        if (t.name === 'floor') floor = mid;
        const spread = `${kilo(Math.min(...per))}-${kilo(Math.max(...per))}`;
        const times = floor ? `${(mid / floor).toFixed(2)}×` : '—';
        const whole = kilo(median(ws.map((w) => w.instructions / perWindow)));
        const lumped = kilo(median(ws.map((w) => lumps(w) / perWindow)));
        const writes = median(ws.map((w) => w.writes / perWindow)).toFixed(2);
        const idle = kilo(median(ws.map((w) => w.idle / perWindow)));
        rows.push(`| ${t.name} | ${mode} | ${kilo(mid)} | ${spread} | ${times} | ${whole} | ${lumped} | ${idle} | ${writes} |`);
        // The window of the median.
        const last = ws[per.indexOf(mid)] ?? ws[ws.length - 1]!;
        const shares = [...last.areas]
          .sort((a, b) => b[1] - a[1])
          .map(([a, n]) => `${a} ${kilo(n / perWindow)}`)
          .join(', ');
        areaRows.push(`| ${t.name} | ${mode} | ${shares} |`);
        process.stderr.write(`${t.name} ${mode}: ${kilo(mid)} instructions per request (${spread}), ${times} the floor\n`);
      }
    }
  } finally {
    sim.child.kill('SIGTERM');
  }
  const section = [
    SECTION,
    '',
    `${measuredBy('npm run bench:instructions')}.`,
    `Each target compiled, on ${process.env.BENCH_NODE === 'current' ? `Node ${process.version}` : "the image's Node (24)"}, under valgrind's callgrind; ${warmup.toLocaleString('en')} requests uninstrumented first, then ${windows} windows of ${perWindow.toLocaleString('en')} requests counted, ${connections} connection${connections === 1 ? '' : 's'}, the same 2 KB chat request as "Chat overhead". Instructions are user space only, every thread of the process (V8's compiler and GC threads, libuv's pool, PGlite's worker); the kernel's share of a system call is not in them. Under valgrind a request takes 10-50 times as long, so what runs by the clock would weigh that much more per request: the process's rate with no request (${idleSeconds} s after the warm-up: timers, the store's upkeep) is taken out of each window in proportion to its length ("idle taken out"), and V8's memory reducer, which under valgrind takes every allocation rate for an idle one, is off (\`--no-memory-reducer\`); for the same reason the young generation is held at 16 MB (\`--min-semi-space-size=16\`): natively it grows under load, to a scavenge every ~600 requests.`,
    '',
    "| target | mode | instructions per request, without V8's compilers and GC (median window) | windows | × floor | with them (median) | V8's compilers and GC alone (median) | idle taken out, per request | write system calls per request |",
    '|---|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
    '',
    "V8's compilers and garbage collection are left out of the first figure because they come in lumps: the first windows still carry some of V8's optimizing, and a full collection lands in one window of several. Where the instructions go, by the symbol of the function that ran them (the median window; JIT code has no symbol and is counted with V8's builtins):",
    '',
    '| target | mode | instructions per request by area |',
    '|---|---|---|',
    ...areaRows,
    '',
    'How to read it: compare a target with the floor of the same run, and a change with the run before it (bench/chat/NOTES.md, "Instructions per request"). These are the instructions the CPU figures of "Chat overhead" pay for, before this machine\'s speed: where a target\'s CPU per request there is a larger multiple of the floor\'s than its instructions are here, the rest is how slowly the same instructions run after each wait (cold caches, a vCPU woken up) and the kernel\'s share of its extra system calls.',
    '',
  ].join('\n');
  publish(SECTION, section);
}

runAsCommand(import.meta.url, main);
