/**
 * `npm run bench [-- --quick]`: the chat overhead benchmark. In one run it measures the
 * simulator called directly and through the gateway (Chat Completions, JSON and SSE, 1 and 50
 * keep-alive connections): added latency p50/p99, throughput, time to first byte and the
 * gateway's RSS, and rewrites the "## Chat overhead" section of bench/RESULTS.md.
 *
 * Settings (environment): BENCH_DURATION_MS (per scenario, default 8000; --quick 2000),
 * BENCH_WARMUP_MS (default 1000; --quick 500), BENCH_CONNECTIONS (default "1,50"),
 * BENCH_VARIANTS (default "metered,no-billing").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { BENCH_KEY, chatBody } from './chat/config.js';
import { runLoad, type LoadResult } from './chat/load.js';
import { envNumber } from './env.js';
import { measuredBy, writeSection } from './results.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const NOTES = fileURLToPath(new URL('./chat/NOTES.md', import.meta.url));
const SECTION = '## Chat overhead';

const quick = process.argv.includes('--quick');
const durationMs = envNumber('BENCH_DURATION_MS', quick ? 2000 : 8000);
const warmupMs = envNumber('BENCH_WARMUP_MS', quick ? 500 : 1000);
const connectionsList = (process.env.BENCH_CONNECTIONS ?? '1,50').split(',').map(Number);

function startChild(args: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/chat/servers.ts', ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    });
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl !== -1) resolve({ child, url: (JSON.parse(buf.slice(0, nl)) as { url: string }).url });
    });
    child.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
}

/** Resident set size of a process in MiB (Linux /proc; ps elsewhere). */
function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The gateway as shipped (metered billing), and with billing off to isolate the chat path. */
const VARIANTS = [
  { name: 'metered', title: 'Gateway as shipped (metered billing on in-memory PGlite)', env: {} },
  { name: 'no-billing', title: 'Chat path alone (a billing that holds and charges nothing)', env: { BENCH_BILLING: 'none' } },
] as const;

interface Row {
  variant: (typeof VARIANTS)[number]['name'];
  mode: 'json' | 'stream';
  connections: number;
  direct: LoadResult;
  gateway: LoadResult;
  gatewayRssMiB: number;
}

const loadAtStart = loadavg()[0]!;

async function main(): Promise<void> {
  const sim = await startChild(['sim']);
  const rows: Row[] = [];
  const idle: Record<string, number> = {};
  const direct = new Map<string, LoadResult>();
  try {
    const wanted = (process.env.BENCH_VARIANTS ?? 'metered,no-billing').split(',');
    for (const variant of VARIANTS.filter((v) => wanted.includes(v.name))) {
      const gw = await startChild(['gateway', sim.url], variant.env);
      idle[variant.name] = rssMiB(gw.child.pid!);
      try {
        for (const connections of connectionsList) {
          for (const mode of ['json', 'stream'] as const) {
            const stream = mode === 'stream';
            const common = { path: '/v1/chat/completions', connections, warmupMs, durationMs };
            // The direct baseline is measured once per scenario, right before the first gateway run.
            const key = `${mode}:${connections}`;
            if (!direct.has(key)) direct.set(key, await runLoad({ ...common, url: sim.url, headers: {}, body: chatBody('gpt-sim', stream) }));
            const d = direct.get(key)!;
            let peak = 0;
            const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(gw.child.pid!))), 100);
            const g = await runLoad({ ...common, url: gw.url, headers: { authorization: `Bearer ${BENCH_KEY}` }, body: chatBody('sim-gpt', stream) });
            clearInterval(sampler);
            rows.push({ variant: variant.name, mode, connections, direct: d, gateway: g, gatewayRssMiB: Math.max(peak, rssMiB(gw.child.pid!)) });
            process.stderr.write(
              `${variant.name} ${mode} x${connections}: direct ${d.rps.toFixed(0)} rps p50 ${d.p50.toFixed(3)} ms; gateway ${g.rps.toFixed(0)} rps p50 ${g.p50.toFixed(3)} ms (errors ${d.errors}/${g.errors})\n`,
            );
          }
        }
      } finally {
        gw.child.kill('SIGTERM');
      }
    }
  } finally {
    sim.child.kill('SIGTERM');
  }
  writeSection(SECTION, render(rows, idle));
}

const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : 'n/a');
const signed = (v: number) => `${v >= 0 ? '+' : ''}${ms(v)}`;

function render(rows: Row[], idle: Record<string, number>): string {
  const lines = [
    SECTION,
    '',
    `${measuredBy(`npm run bench${quick ? ' -- --quick' : ''}`)}, ${process.platform}.`,
    `The load generator (undici Pool, keep-alive, closed loop), the simulator and the gateway run as separate processes on this machine; ${durationMs / 1000} s per scenario after ${warmupMs / 1000} s of warm-up. Load average: ${loadAtStart.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end (other work on the machine shows here).`,
    'Request: POST /v1/chat/completions, a 2 KB body, a 12-word answer (SSE: 15 events). The gateway runs every feature of `tollgate serve`: key lookup, validation, billing, passthrough with the usage tap.',
    '',
  ];
  for (const variant of VARIANTS) {
    const vr = rows.filter((r) => r.variant === variant.name);
    if (!vr.length) continue;
    lines.push(
      `### ${variant.title}`,
      '',
      '| mode | conns | direct req/s | gateway req/s | gateway/direct | direct p50 / p99 ms | gateway p50 / p99 ms | added p50 / p99 ms | direct TTFB p50 ms | gateway TTFB p50 ms | added TTFB ms | errors |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    );
    for (const r of vr) {
      const d = r.direct;
      const g = r.gateway;
      lines.push(
        `| ${r.mode} | ${r.connections} | ${d.rps.toFixed(0)} | ${g.rps.toFixed(0)} | ${((g.rps / d.rps) * 100).toFixed(0)}% | ${ms(d.p50)} / ${ms(d.p99)} | ${ms(g.p50)} / ${ms(g.p99)} | ${signed(g.p50 - d.p50)} / ${signed(g.p99 - d.p99)} | ${ms(d.ttfb50)} | ${ms(g.ttfb50)} | ${signed(g.ttfb50 - d.ttfb50)} | ${d.errors + g.errors} |`,
      );
    }
    const peak = Math.max(...vr.map((r) => r.gatewayRssMiB));
    lines.push('', `Gateway RSS: ${idle[variant.name]!.toFixed(0)} MiB idle, ${peak.toFixed(0)} MiB at peak under load.`, '');
    const at = (mode: string, c: number) => vr.find((r) => r.mode === mode && r.connections === c);
    const one = at('json', 1);
    const oneS = at('stream', 1);
    const fifty = at('json', 50);
    const fiftyS = at('stream', 50);
    const goals: string[] = [];
    if (one)
      goals.push(
        `- added p50 at 1 connection (goal ≤ 0.3 ms): JSON ${signed(one.gateway.p50 - one.direct.p50)} ms${oneS ? `, SSE ${signed(oneS.gateway.p50 - oneS.direct.p50)} ms` : ''}`,
      );
    if (fifty)
      goals.push(
        `- throughput at 50 connections (goal ≥ 40% of direct): JSON ${((fifty.gateway.rps / fifty.direct.rps) * 100).toFixed(0)}%${fiftyS ? `, SSE ${((fiftyS.gateway.rps / fiftyS.direct.rps) * 100).toFixed(0)}%` : ''}`,
      );
    if (oneS) goals.push(`- first byte added, SSE at 1 connection (goal ≤ 0.5 ms): ${signed(oneS.gateway.ttfb50 - oneS.direct.ttfb50)} ms`);
    if (goals.length) lines.push(...goals, '');
  }
  if (existsSync(NOTES)) lines.push(readFileSync(NOTES, 'utf8').trim(), '');
  return lines.join('\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
