import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';

/**
 * One process per data folder. PGlite has no lock of its own: two processes on one folder each
 * see their own database, lose each other's writes, and can leave a folder that no longer opens.
 *
 * The lock is a listening Unix socket whose name is derived from the folder's real path: binding
 * is atomic, and the kernel releases it when the process dies, however it dies (no stale lock
 * file to clean up after a SIGKILL). On Linux the socket is in the abstract namespace (no file);
 * elsewhere it is a socket file in the folder, taken over when nothing answers on it. Whoever
 * connects is told the holder's pid, host and start time, so the refusal can name it.
 *
 * Abstract sockets are per network namespace: two containers that share a volume but not a
 * network namespace are not kept apart by this (run PostgreSQL for more than one replica).
 */
export class DataDirLockedError extends Error {
  override name = 'DataDirLockedError';
}

export interface DataDirLock {
  release(): Promise<void>;
}

interface Holder {
  pid: number;
  host: string;
  since: string;
}

export async function lockDataDir(dir: string): Promise<DataDirLock> {
  const real = realpathSync(dir);
  const address =
    process.platform === 'linux' ? `\0tollgate-data-${createHash('sha256').update(real).digest('hex').slice(0, 32)}` : join(real, '.tollgate.lock.sock');
  const me: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  const server = createServer((socket) => socket.end(JSON.stringify(me)));
  try {
    await listen(server, address);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    const holder = await ask(address);
    if (holder === 'nobody' && process.platform !== 'linux') {
      // A socket file left by a process that died: nothing listens on it any more.
      const { unlinkSync } = await import('node:fs');
      unlinkSync(address);
      await listen(server, address);
    } else {
      const who = holder === 'nobody' ? 'another process' : `process ${holder.pid} on ${holder.host} (since ${holder.since})`;
      throw new DataDirLockedError(
        `the data folder ${real} is in use by ${who}; one gateway per data folder (stop it first, or give this one --data of its own)`,
      );
    }
  }
  // The lock must not keep an otherwise finished process alive.
  server.unref();
  return { release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function listen(server: Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(address, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Who holds the lock, or 'nobody' when nothing answers (or the answer is not ours). */
function ask(address: string): Promise<Holder | 'nobody'> {
  return new Promise((resolve) => {
    let buf = '';
    const socket = createConnection(address);
    socket.setTimeout(2000, () => socket.destroy());
    socket.on('data', (d: Buffer) => (buf += d.toString('utf8')));
    socket.on('error', () => resolve('nobody'));
    socket.on('close', () => {
      try {
        const h = JSON.parse(buf) as Holder;
        resolve(typeof h.pid === 'number' ? h : 'nobody');
      } catch {
        resolve('nobody');
      }
    });
  });
}
