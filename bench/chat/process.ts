import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { node24 } from '../../test/support/node24.js';

/** The benchmark's processes and their own counters (/proc), shared by the chat benchmarks. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** /proc/PID/stat counts in clock ticks (USER_HZ = 100 on Linux). */
export const TICK_US = 1e6 / 100;

let built: string | undefined;

/**
 * The Node the compiled targets run on: the image's (Node 24 LTS, the npm registry's binary that
 * `npm run test:node24` also uses) unless BENCH_NODE=current (the Node running the benchmark).
 */
export async function imageNode(): Promise<string> {
  return process.env.BENCH_NODE === 'current' ? process.execPath : node24();
}

/**
 * bench/chat/servers.ts and what it imports compiled by tsc, as the image runs the gateway (no
 * tsx at run time), into node_modules/.cache/tollgate-bench (inside the checkout, so packages
 * resolve). Built once per benchmark run.
 */
export function compiledServers(): string {
  if (built) return built;
  const out = join(ROOT, 'node_modules/.cache/tollgate-bench');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const config = join(out, 'tsconfig.json');
  writeFileSync(
    config,
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.json'),
      compilerOptions: { rootDir: ROOT, outDir: out, noEmit: false },
      include: [],
      files: [join(ROOT, 'bench/chat/servers.ts')],
    }),
  );
  execFileSync(process.execPath, [createRequire(import.meta.url).resolve('typescript/bin/tsc'), '-p', config], { stdio: 'inherit' });
  for (const asset of ['proxy/store/migrations', 'api/snapshot/config_discovery.proto']) cpSync(join(ROOT, asset), join(out, asset), { recursive: true });
  return (built = join(out, 'bench/chat/servers.js'));
}

/** A process of bench/chat/servers.ts, listening. */
export interface Child {
  child: ChildProcess;
  url: string;
  /** A gateway's admin URL (its /metrics). */
  admin?: string;
  /** The lines `{"books": ...}` it printed after its first (a metered gateway's books at shutdown). */
  lines: Record<string, unknown>[];
}

/**
 * `bench/chat/servers.ts ARGS` in a process of its own, through tsx (from the sources) or
 * compiled on the image's Node (`compiled`: as the image runs); resolves with the URL it prints
 * when listening (and a gateway's admin URL, where its /metrics are).
 */
export async function startChild(args: string[], env: Record<string, string> = {}, compiled = false): Promise<Child> {
  const entry = compiled ? [compiledServers()] : ['--import', 'tsx', 'bench/chat/servers.ts'];
  const node = compiled ? await imageNode() : process.execPath;
  return new Promise((resolve, reject) => {
    const child = spawn(node, [...entry, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    });
    let started: Child | undefined;
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
        const text = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!started) resolve((started = { child, ...(JSON.parse(text) as { url: string; admin?: string }), lines: [] }));
        // A log line on stdout is not one of these.
        else if (text.startsWith('{"books"')) started.lines.push(JSON.parse(text) as Record<string, unknown>);
      }
    });
    child.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
}

/** Stops a child (SIGTERM; SIGKILL after `ms`) and waits for its exit, so that what it prints on the way out is in its `lines`. */
export function stopChild(c: Child, ms = 30_000): Promise<void> {
  if (c.child.exitCode !== null || c.child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(() => c.child.kill('SIGKILL'), ms);
    c.child.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
    c.child.kill('SIGTERM');
  });
}

export function cpuTicks(pid: number): number {
  try {
    return statTicks(`/proc/${pid}/stat`);
  } catch {
    return NaN;
  }
}

/** utime + stime (fields 14 and 15) of a process's or a thread's stat file. */
function statTicks(path: string): number {
  const f = readFileSync(path, 'utf8').split(') ')[1]!.split(' ');
  return Number(f[11]) + Number(f[12]);
}

/**
 * CPU ticks so far of the process's threads named `name` (/proc/PID/task/TID/comm; Node 24, not
 * 20, names a worker thread after its `name` option), 0 when there is none.
 */
export function threadTicks(pid: number, name: string): number {
  let ticks = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() !== name) continue;
        ticks += statTicks(`/proc/${pid}/task/${tid}/stat`);
      } catch {
        // The thread ended between the listing and the read.
      }
    }
  } catch {
    return NaN;
  }
  return ticks;
}

/**
 * The process's write system calls so far (/proc/PID/io `syscw`: write, writev, sendmsg…): a
 * count that does not depend on how busy the machine is, unlike its CPU time.
 */
export function writeCalls(pid: number): number {
  try {
    const m = /^syscw: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

export function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}
