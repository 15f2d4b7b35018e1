import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/tollgate.js', import.meta.url));
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `tollgate ...` from the sources to completion. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, TOLLGATE_FROM_SOURCE: '1', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts a long-running command and resolves once a JSON log line matches. */
export function startCli(
  args: string[],
  ready: (line: Record<string, unknown>) => boolean,
  env: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<{ child: ChildProcess; lines: Record<string, unknown>[]; match: Record<string, unknown>; exited: Promise<number | null> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, TOLLGATE_FROM_SOURCE: '1', ...env } });
    const lines: Record<string, unknown>[] = [];
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    let buf = '';
    let done = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no ready line within ${timeoutMs} ms:\n${buf}${JSON.stringify(lines)}`));
    }, timeoutMs);
    child.stderr.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const text = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let line: Record<string, unknown>;
        try {
          line = JSON.parse(text) as Record<string, unknown>;
        } catch {
          line = { text };
        }
        lines.push(line);
        if (!done && ready(line)) {
          done = true;
          clearTimeout(timer);
          resolve({ child, lines, match: line, exited });
        }
      }
    });
    child.on('exit', (code) => {
      if (!done) {
        clearTimeout(timer);
        reject(new Error(`exited with ${code} before ready:\n${buf}${JSON.stringify(lines)}`));
      }
    });
  });
}
