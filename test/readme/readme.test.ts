import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ROOT, runCli } from '../support/cli.js';
import { deadPort } from '../support/ports.js';
import { fencedBlocks, shownAnswers, tableColumn, type Block } from './markdown.js';

/**
 * Walks the README as a newcomer would, against `npm start` (the quickstart, moved to free ports
 * and a fresh data folder): every `sh` block of the quickstart, Clients (curl), Credits, Images
 * and Videos sections runs, in order, twice (the Idempotency-Key examples must survive a second
 * run), and must exit 0, show the answers its comments show, and answer no error it does not
 * show; every JS snippet runs as a file (`node x.mjs`, the packages resolved as after
 * `npm install`), the webhook receiver among them, which must get the examples' deliveries.
 * So the README cannot drift from what the gateway does.
 */

const README = join(ROOT, 'README.md');
const WALKED = new Set(['', 'Clients', 'Credits', 'Images', 'Videos']);

interface Ports {
  api: number;
  admin: number;
  sim: number;
  hooks: number;
}

/** The README's quickstart addresses moved to this test's ports. */
function moved(code: string, p: Ports): string {
  return code
    .replaceAll('127.0.0.1:8080', `127.0.0.1:${p.api}`)
    .replaceAll('127.0.0.1:9090', `127.0.0.1:${p.admin}`)
    .replaceAll('127.0.0.1:8090', `127.0.0.1:${p.sim}`)
    .replaceAll('127.0.0.1:3000', `127.0.0.1:${p.hooks}`);
}

/** The environment of a newcomer's shell: no store or token of this machine's test set-up. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, TOLLGATE_FROM_SOURCE: '1', ...extra };
  for (const k of ['DATABASE_URL', 'REDIS_URL', 'TOLLGATE_ADMIN_TOKEN', 'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'OPENAI_API_KEY']) delete env[k];
  return env;
}

/** Runs a command to its end; its stderr goes to a file, as a terminal's would, so `tee /dev/stderr` can open it. */
async function run(
  cmd: string,
  args: string[],
  o: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<{ code: number | null; out: string; err: string }> {
  const errFile = join(o.cwd, `stderr-${process.hrtime.bigint()}.txt`);
  const fd = await open(errFile, 'w');
  const r = await new Promise<{ code: number | null; out: string }>((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: o.cwd, env: o.env, detached: true, stdio: ['ignore', 'pipe', fd.fd] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, o.timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
  await fd.close();
  return { ...r, err: await readFile(errFile, 'utf8') };
}

async function until<T>(probe: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Stops a command and everything it started: npm exits before the gateway under it has finished
 * its shutdown (the last durable copy of its data folder), so the whole process group is awaited.
 */
async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child?.pid) return;
  const group = -child.pid;
  try {
    process.kill(group, 'SIGTERM');
  } catch {
    return;
  }
  const end = performance.now() + 30_000;
  for (;;) {
    try {
      process.kill(group, 0);
    } catch {
      return; // ESRCH: none of the group is left
    }
    if (performance.now() > end) {
      process.kill(group, 'SIGKILL');
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the README, walked against npm start', () => {
  let markdown: string;
  let blocks: Block[];
  let ports: Ports;
  let work: string;
  let gateway: ChildProcess | undefined;
  let receiver: ChildProcess | undefined;
  let receiverLog = '';
  let gatewayLog = '';

  beforeAll(async () => {
    markdown = await readFile(README, 'utf8');
    blocks = fencedBlocks(markdown).filter((b) => WALKED.has(b.section));
    ports = { api: await deadPort(), admin: await deadPort(), sim: await deadPort(), hooks: await deadPort() };
    work = await mkdtemp(join(tmpdir(), 'tollgate-readme-'));
    // As after `npm install openai @anthropic-ai/sdk` in the folder the snippets are saved in.
    await symlink(join(ROOT, 'node_modules'), join(work, 'node_modules'), 'dir');
    gateway = spawn(
      'npm',
      ['start', '--', '--port', String(ports.api), '--admin-port', String(ports.admin), '--simulator-port', String(ports.sim), '--data', join(work, 'data')],
      { cwd: ROOT, env: cleanEnv(), detached: true },
    );
    gateway.stderr!.on('data', (d: Buffer) => (gatewayLog += d));
    gateway.stdout!.on('data', (d: Buffer) => (gatewayLog += d));
    // Ready, and the quickstart's first grant made.
    await until(
      async () => {
        const r = await fetch(`http://127.0.0.1:${ports.api}/v1/credits`, { headers: { authorization: 'Bearer sk-service-quickstart' } });
        return r.status === 200 && ((await r.json()) as { balance: string }).balance === '1000.000000' ? true : undefined;
      },
      60_000,
      'the quickstart to serve',
    );
    // The webhook receiver of the Webhooks section, started first as the README says.
    const hook = blocks.find((b) => b.lang === 'js' && b.code.includes('createServer'));
    expect(hook, 'the webhook receiver example').toBeDefined();
    await writeFile(join(work, 'receiver.mjs'), hook!.code);
    receiver = spawn(process.execPath, ['receiver.mjs'], {
      cwd: work,
      env: cleanEnv({ WEBHOOK_SECRET: 'whsec-demo', PORT: String(ports.hooks) }),
      detached: true,
    });
    receiver.stdout!.on('data', (d: Buffer) => (receiverLog += d));
    receiver.stderr!.on('data', (d: Buffer) => (receiverLog += d));
    await until(
      async () => ((await fetch(`http://127.0.0.1:${ports.hooks}/`, { method: 'POST', body: '{}' })).status === 401 ? true : undefined),
      10_000,
      'the receiver',
    );
  }, 120_000);

  afterAll(async () => {
    await stop(receiver);
    await stop(gateway);
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('every flag of `tollgate serve --help` is in the flag table, and nothing else', async () => {
    const help = await runCli(['serve', '--help']);
    const flags = [...help.stdout.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]);
    const table = tableColumn(markdown, '### `tollgate serve` flags').map((f) => f.split(' ')[0]);
    expect(table.sort()).toEqual(flags.sort());
  });

  it('runs every sh block of the quickstart, Clients (curl), Credits, Images and Videos, twice, showing what the README shows', async () => {
    const sh = blocks.filter((b) => b.lang === 'sh' && (b.section !== 'Clients' || b.code.includes('curl')));
    expect(sh.map((b) => b.section)).toEqual(expect.arrayContaining(['', 'Clients', 'Credits', 'Images', 'Videos']));
    const npx = `npx() { if [ "$1" = tollgate ]; then shift; if [ "$1" = credits ]; then node "${BIN}" "$@" --admin-url http://127.0.0.1:${ports.admin}; else node "${BIN}" "$@"; fi; else command npx "$@"; fi; }`;
    for (const round of [1, 2]) {
      for (const b of sh) {
        const code = moved(b.code, ports);
        const r = await run('bash', ['-c', `set -e\n${npx}\n${code}`], { cwd: work, env: cleanEnv(), timeoutMs: 60_000 });
        const where = `README.md:${b.line} (${b.section || 'quickstart'}), run ${round}:\n${r.out}\n${r.err}\n--- gateway log tail:\n${gatewayLog.slice(-2000)}`;
        expect(r.code, where).toBe(0);
        const said = `${r.out}\n${r.err}`;
        // An error answer appears only where the README shows one.
        if (!code.includes('# {"error"')) expect(said, where).not.toMatch(/\{"error":/);
        if (round === 1) for (const shown of shownAnswers(code)) expect(said, `${where}\nexpected to show ${shown.source}`).toMatch(shown);
      }
    }
  }, 600_000);

  it('the webhook receiver got the signed deliveries of the image and video examples', async () => {
    await until(
      async () => (/\/hooks\/images \S+ succeeded/.test(receiverLog) && /\/hooks\/videos \S+ succeeded/.test(receiverLog) ? true : undefined),
      45_000,
      `the deliveries (receiver said: ${receiverLog})`,
    );
    expect(receiverLog).not.toMatch(/Error/);
  }, 60_000);

  it('runs every JS snippet as a file, as the README says to', async () => {
    const snippets = blocks.filter((b) => b.lang === 'js' && !b.code.includes('createServer'));
    expect(snippets.length).toBeGreaterThanOrEqual(3);
    for (const [i, b] of snippets.entries()) {
      const file = `snippet-${i}.mjs`;
      await writeFile(join(work, file), moved(b.code, ports));
      const r = await run(process.execPath, [file], { cwd: work, env: cleanEnv(), timeoutMs: 60_000 });
      expect(r.code, `README.md:${b.line} (${b.section || 'quickstart'}):\n${r.out}\n${r.err}`).toBe(0);
      expect(r.out.trim().length, `README.md:${b.line} printed nothing`).toBeGreaterThan(0);
    }
    // "As TypeScript": the first one as hello.mts, in a folder as `npm init -y` leaves it (CommonJS), run with tsx.
    const ts = join(work, 'ts');
    await mkdir(ts);
    await symlink(join(ROOT, 'node_modules'), join(ts, 'node_modules'), 'dir');
    await writeFile(join(ts, 'package.json'), JSON.stringify({ name: 'ts', version: '1.0.0', type: 'commonjs' }));
    await writeFile(join(ts, 'hello.mts'), moved(snippets[0]!.code, ports));
    const r = await run(join(ts, 'node_modules', '.bin', 'tsx'), ['hello.mts'], { cwd: ts, env: cleanEnv(), timeoutMs: 60_000 });
    expect(r.code, `README.md:${snippets[0]!.line} as hello.mts:\n${r.out}\n${r.err}`).toBe(0);
  }, 180_000);
});
