import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';

const RESULTS = fileURLToPath(new URL('./RESULTS.md', import.meta.url));

/**
 * `doc` with its `heading` section (from that line up to the next "## " heading) replaced by
 * `section`, or with `section` appended when there is none. Each benchmark owns one section,
 * so a run leaves the others' figures as they are.
 */
export function replaceSection(doc: string, heading: string, section: string): string {
  // A "## " line inside the section would end it there on the next run, and another benchmark's
  // run could take the rest for its own (notes copied into a section once did this).
  const inner = section.split('\n').find((line, i) => i > 0 && line.startsWith('## '));
  if (inner) throw new Error(`the ${heading} section holds a heading of its own ("${inner}"): use ### inside a section`);
  // Searched in "\n" + doc so a heading on the first line is found too; the index is the heading's in doc.
  const start = `\n${doc}`.indexOf(`\n${heading}\n`);
  if (start === -1) return `${doc.trimEnd()}\n\n${section.trimEnd()}\n`;
  const after = doc.indexOf('\n## ', start + heading.length);
  return `${(doc.slice(0, start) + section + (after === -1 ? '' : doc.slice(after))).trimEnd()}\n`;
}

/** Rewrites one section of bench/RESULTS.md (see replaceSection). */
export function writeSection(heading: string, section: string): void {
  const current = existsSync(RESULTS) ? readFileSync(RESULTS, 'utf8') : '# Benchmark results\n';
  writeFileSync(RESULTS, replaceSection(current, heading, section));
  process.stderr.write(`wrote ${heading} to bench/RESULTS.md\n`);
}

/** "Measured <when> UTC by `<command>` on <cores> × <CPU>, <memory> GiB, Node <version>": the opening of a results section. */
export function measuredBy(command: string): string {
  const cpu = cpus();
  return `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`${command}\` on ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}`;
}

/**
 * How this machine's CPUs idle, as the kernel says (cpuidle's driver and, in a KVM guest using
 * `haltpoll`, how long an idle vCPU polls before it halts), or undefined where it does not say.
 * One-connection latencies move with it: a vCPU that halts while a process waits for a store or
 * an upstream is woken by the host, slower than one still polling (RESULTS.md, "Hot path work",
 * 2026-11-29, late evening).
 */
export function cpuIdle(read: (path: string) => string | undefined = readTrimmed): string | undefined {
  const driver = read('/sys/devices/system/cpu/cpuidle/current_driver');
  if (!driver) return undefined;
  const pollNs = driver === 'haltpoll' ? read('/sys/module/haltpoll/parameters/guest_halt_poll_ns') : undefined;
  return pollNs === undefined ? `CPU idle driver ${driver}` : `CPU idle driver haltpoll, an idle vCPU polling ${Number(pollNs) / 1000} µs before it halts`;
}

function readTrimmed(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The median of `xs` (the mean of the two middle ones when their number is even). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** A benchmark's section on stdout, and into bench/RESULTS.md unless `--no-write` was given. */
export function publish(heading: string, section: string): void {
  process.stdout.write(`${section}\n`);
  if (!process.argv.includes('--no-write')) writeSection(heading, section);
}

/** Runs a benchmark's `main` when `url` (its import.meta.url) is the command's entry file; an error ends the process with status 1. */
export function runAsCommand(url: string, main: () => Promise<void>): void {
  if (!process.argv[1] || fileURLToPath(url) !== process.argv[1]) return;
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
