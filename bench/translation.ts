/**
 * `npm run bench:translation [-- --quick]`: what translation between chat protocols costs, as a
 * ratio to passthrough measured in the same run on the same gateway process. The gateway runs
 * with billing off (the chat path alone: billing costs the same either way) beside the simulator,
 * which serves each model through one protocol only. For each client protocol and each backend
 * protocol, JSON and SSE: the gateway's own CPU per request at 50 connections (goal: a translated
 * request at most 1.5x its client protocol's passthrough) and the added p50 at 1 connection.
 * Rewrites the "## Translation overhead" section of bench/RESULTS.md.
 */
import { loadavg } from 'node:os';
import { runLoad, type LoadResult } from './chat/load.js';
import { BENCH_KEY } from './chat/config.js';
import { cpuTicks, startChild, TICK_US } from './chat/process.js';
import { runWrk, wrkAvailable } from './chat/wrk.js';
import { envNumber } from './env.js';
import { measuredBy, publish } from './results.js';

const SECTION = '## Translation overhead';
const quick = process.argv.includes('--quick');
const durationMs = envNumber('BENCH_DURATION_MS', quick ? 2000 : 5000);
const warmupMs = envNumber('BENCH_WARMUP_MS', 500);

type Wire = 'chat-completions' | 'messages' | 'responses';
const WIRES: Wire[] = ['chat-completions', 'messages', 'responses'];
/** The model served through each backend protocol only. */
const MODEL: Record<Wire, string> = { 'chat-completions': 'sim-chat-only', messages: 'sim-claude', responses: 'sim-responses-only' };
const PATH: Record<Wire, string> = { 'chat-completions': '/v1/chat/completions', messages: '/v1/messages', responses: '/v1/responses' };

/** The same small conversation (about 2 KB) in each client protocol. */
function body(wire: Wire, model: string, stream: boolean): string {
  const system = 'You are a helpful assistant that answers briefly and precisely. '.repeat(12);
  const turns = [
    { role: 'user', content: 'What does a gateway do?' },
    { role: 'assistant', content: 'It forwards requests to upstream models and meters them.' },
    { role: 'user', content: 'And how is usage counted?' },
  ];
  if (wire === 'chat-completions')
    return JSON.stringify({ model, stream, max_completion_tokens: 256, messages: [{ role: 'system', content: system }, ...turns] });
  if (wire === 'messages') return JSON.stringify({ model, stream, max_tokens: 256, system, messages: turns });
  return JSON.stringify({ model, stream, max_output_tokens: 256, instructions: system, input: turns, store: false });
}

interface Row {
  client: Wire;
  backend: Wire;
  mode: 'json' | 'stream';
  one: LoadResult;
  many: LoadResult;
  cpuUs: number;
}

async function main(): Promise<void> {
  const useWrk = await wrkAvailable();
  const sim = await startChild(['sim']);
  const gw = await startChild(['gateway', sim.url], { BENCH_BILLING: 'none' });
  const pid = gw.child.pid!;
  const rows: Row[] = [];
  const optsOf = (client: Wire, backend: Wire, mode: 'json' | 'stream') => ({
    url: gw.url,
    path: PATH[client],
    headers: { authorization: `Bearer ${BENCH_KEY}`, ...(client === 'messages' ? { 'anthropic-version': '2023-06-01' } : {}) },
    body: body(client, MODEL[backend], mode === 'stream'),
    warmupMs,
    durationMs,
  });
  try {
    // Every path once before anything is counted, so the first pair does not pay for the JIT.
    for (const client of WIRES)
      for (const backend of WIRES)
        for (const mode of ['json', 'stream'] as const) await runLoad({ ...optsOf(client, backend, mode), connections: 8, warmupMs: 0, durationMs: 300 });
    for (const client of WIRES) {
      for (const backend of WIRES) {
        for (const mode of ['json', 'stream'] as const) {
          const opts = optsOf(client, backend, mode);
          const one = await runLoad({ ...opts, connections: 1 });
          const before = cpuTicks(pid);
          const t0 = performance.now();
          const many = useWrk ? await runWrk({ ...opts, connections: 50 }) : await runLoad({ ...opts, connections: 50 });
          const served = many.rps * ((performance.now() - t0) / 1000);
          const cpuUs = ((cpuTicks(pid) - before) * TICK_US) / served;
          rows.push({ client, backend, mode, one, many, cpuUs });
          process.stderr.write(
            `${client} -> ${backend} ${mode}: ${many.rps.toFixed(0)} rps, cpu ${cpuUs.toFixed(1)} µs/req, p50 x1 ${one.p50.toFixed(3)} ms, errors ${one.errors + many.errors}\n`,
          );
        }
      }
    }
  } finally {
    gw.child.kill('SIGTERM');
    sim.child.kill('SIGTERM');
  }
  publish(SECTION, render(rows, useWrk));
}

const fx = (v: number, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : 'n/a');

function render(rows: Row[], useWrk: boolean): string {
  const lines = [
    SECTION,
    '',
    `${measuredBy(`npm run bench:translation${quick ? ' -- --quick' : ''}`)}, ${process.platform}. Load average ${loadavg()[0]!.toFixed(1)} at the end.`,
    `One gateway process (billing off) beside the simulator; ${useWrk ? 'wrk' : 'the Node load generator'} at 50 connections for CPU and throughput, the Node load generator at 1 connection for latency; ${durationMs / 1000} s per scenario. The request is the same 2 KB conversation in each client protocol, the answer 12 words (SSE: one event a word). "× passthrough" divides a pair's CPU per request by that of the same client protocol passed through (client = backend), measured minutes apart in this run. Goal: at most 1.5×.`,
    '',
    '| client → backend | mode | req/s (50) | CPU µs/req | × passthrough | p50 ms (1 conn) | added p50 vs passthrough ms | errors |',
    '|---|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const pass = rows.find((p) => p.client === r.client && p.backend === r.client && p.mode === r.mode)!;
    const same = r.client === r.backend;
    lines.push(
      `| ${r.client} → ${r.backend}${same ? ' (passthrough)' : ''} | ${r.mode} | ${r.many.rps.toFixed(0)} | ${fx(r.cpuUs)} | ${same ? '1.00×' : `${(r.cpuUs / pass.cpuUs).toFixed(2)}×`} | ${fx(r.one.p50, 3)} | ${same ? '—' : `${r.one.p50 - pass.one.p50 >= 0 ? '+' : ''}${(r.one.p50 - pass.one.p50).toFixed(3)}`} | ${r.one.errors + r.many.errors} |`,
    );
  }
  const crossed = rows.filter((r) => r.client !== r.backend);
  const ratios = crossed.map((r) => r.cpuUs / rows.find((p) => p.client === r.client && p.backend === r.client && p.mode === r.mode)!.cpuUs);
  lines.push(
    '',
    `Worst pair: ${Math.max(...ratios).toFixed(2)}× its passthrough's CPU; median ${ratios.sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!.toFixed(2)}×.`,
    '',
  );
  return lines.join('\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
