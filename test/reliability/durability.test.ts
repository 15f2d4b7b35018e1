import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../proxy/billing/index.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { BIN, ROOT } from '../support/cli.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { pgliteTarget, writeManifests } from '../support/serve-child.js';

/**
 * Standalone durability: PGlite on a data folder does not fsync, so `serve --data` makes the
 * billing journal (O_DSYNC) the durable point of charges. Traced with strace, a request's charge
 * reaches an O_DSYNC write before the final bytes of its answer are written to the socket.
 */
const KEY = 'sk-service-durability';
const STRACE = ['/usr/bin/strace', '/bin/strace'].find((p) => existsSync(p));

let sim: Simulator;
let configDir: string;
let dataDir: string;
beforeAll(async () => {
  sim = await startSimulator();
  configDir = await writeManifests(
    [chatRoute('m', `${sim.url}/v1`), group('g', ['m']), apiKey('k', KEY, 'g', { account: 'acct' })],
    'tollgate-durability-config-',
  );
  dataDir = await mkdtemp(join(tmpdir(), 'tollgate-durability-data-'));
  const s = await pgliteTarget(dataDir).open();
  await s.tx((q) => credit(q, { account: 'acct', operationId: 'durability-grant', amount: 1_000_000_000n }));
  await s.close();
});
afterAll(async () => {
  await sim?.close();
  await rm(configDir, { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
});

describe.skipIf(!STRACE)('serve --data (PGlite)', () => {
  it("writes a request's charge with O_DSYNC before the last bytes of its answer reach the socket", async () => {
    const trace = join(dataDir, 'strace.out');
    const child = spawn(
      STRACE!,
      [
        '-f',
        '-qq',
        '-s',
        '8192',
        '-e',
        'trace=openat,write,writev,pwrite64,pwritev',
        '-o',
        trace,
        process.execPath,
        BIN,
        'serve',
        '--config',
        configDir,
        '--data',
        dataDir,
        '--port',
        '0',
        '--admin-port',
        '0',
      ],
      { cwd: ROOT, env: { ...process.env, TOLLGATE_FROM_SOURCE: '1', DATABASE_URL: '', TOLLGATE_LOG_LEVEL: 'info' } },
    );
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    // The gateway's own pid (strace's child): the task worker's owner names it.
    const { url, pid } = await new Promise<{ url: string; pid: number }>((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error(`no listening line: ${buf}`)), 60_000);
      child.stderr.on('data', (d: Buffer) => {
        buf += d.toString();
        const m = /"msg":"gateway listening".*?"api":"([^"]+)"/.exec(buf);
        const owner = /"owner":"[^":]*:(\d+):/.exec(buf);
        if (m && owner) {
          clearTimeout(timer);
          resolve({ url: m[1]!, pid: Number(owner[1]) });
        }
      });
    });
    const marker = `durability-${randomBytes(6).toString('hex')}`;
    try {
      const r = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': marker },
        body: JSON.stringify({ model: 'm', stream: false, messages: [{ role: 'user', content: 'hello' }] }),
      });
      expect(r.status).toBe(200);
      await r.json();
    } finally {
      // strace exits with the process it traces.
      process.kill(pid, 'SIGTERM');
      expect(await exited).toBe(0);
    }
    const lines = (await readFile(trace, 'utf8')).split('\n');
    // The journal's segments are opened O_DSYNC: each write returns once its data is on disk.
    // (A busy thread pool splits syscalls over "unfinished" and "resumed" lines: match the call's own line.)
    const opens = lines.filter((l) => /^\d+\s+openat\(AT_FDCWD, "[^"]*\/journal\/[^"]*\.jsonl", /.test(l));
    expect(opens.length).toBeGreaterThan(0);
    for (const l of opens) expect(l).toContain('O_DSYNC');
    // The charge: a journal record (its lines start {"o":...) naming the request.
    const journalWrite = lines.findIndex((l) => /^\d+\s+(?:write|writev|pwrite64|pwritev)\(\d+, (?:\[\{iov_base=)?"\{\\"o\\":/.test(l) && l.includes(marker));
    // (The upstream request carries the id too: the answer is the write that starts "HTTP/1.1".)
    const answerWrite = lines.findIndex(
      (l) => /^\d+\s+(?:write|writev)\(\d+, (?:\[\{iov_base=)?"HTTP\/1\.1 200/.test(l) && l.includes(`x-request-id: ${marker}`),
    );
    const seen = lines.filter((l) => l.includes(marker)).map((l) => l.slice(0, 160));
    expect(journalWrite, seen.join('\n')).toBeGreaterThan(-1);
    expect(answerWrite, seen.join('\n')).toBeGreaterThan(-1);
    // Durable when the write returns: with -f, a write another thread interrupts ends on a "resumed" line.
    const tid = /^(\d+)/.exec(lines[journalWrite]!)![1]!;
    // A thread has one syscall at a time: its next "<... x resumed>" line ends the unfinished write.
    const journalDone = lines[journalWrite]!.includes('<unfinished ...>')
      ? lines.findIndex((l, i) => i > journalWrite && new RegExp(`^${tid}\\s+<\\.\\.\\. `).test(l))
      : journalWrite;
    expect(
      journalDone,
      lines
        .filter((l) => new RegExp(`^${tid}\\s`).test(l))
        .slice(-20)
        .join('\n'),
    ).toBeGreaterThan(-1);
    expect(journalDone).toBeLessThan(answerWrite);
  }, 120_000);
});
