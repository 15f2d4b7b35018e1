import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockDataDir } from '../../proxy/store/lock.js';
import { runCli } from '../support/cli.js';
import { deadPort } from '../support/ports.js';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { pgliteTarget, serveChild, writeManifests } from '../support/serve-child.js';

// serve prefers DATABASE_URL over --data: these tests are about the data folder and the ports.
const ENV = { DATABASE_URL: '' };

let configDir: string;
beforeAll(async () => {
  configDir = await writeManifests([chatRoute('m', 'http://127.0.0.1:1/v1'), group('g', ['m']), apiKey('k', 'sk-service-start-test', 'g')], 'tg-start-config-');
});
afterAll(async () => {
  await rm(configDir, { recursive: true, force: true });
});

function occupy(port = 0): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

/** Whether a port can be bound now (nothing of the failed gateway kept it). */
async function free(port: number): Promise<boolean> {
  try {
    const { server } = await occupy(port);
    await new Promise<void>((r) => server.close(() => r()));
    return true;
  } catch {
    return false;
  }
}

describe('one process per data folder', () => {
  it('a second serve on a folder another process has open exits at once, naming the holder; the first keeps serving', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tg-start-data-'));
    const first = await serveChild(pgliteTarget(dir), configDir, { env: ENV });
    try {
      const second = await runCli(['serve', '--config', configDir, '--data', dir, '--port', '0', '--admin-port', '0'], ENV);
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`is in use by process ${first.child.pid}`);
      const health = await fetch(`${first.adminUrl}/healthz`);
      expect(health.status).toBe(200);
    } finally {
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
    }
    // Released with the process: the folder can be taken again.
    const lock = await lockDataDir(join(dir, 'pg'));
    await lock.release();
    await rm(dir, { recursive: true, force: true });
  }, 90_000);

  it('a lock is released by the kernel when its holder dies, and refused while it lives', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tg-start-lock-'));
    const held = await lockDataDir(dir);
    await expect(lockDataDir(dir)).rejects.toThrow(`is in use by process ${process.pid}`);
    await held.release();
    const again = await lockDataDir(dir);
    await again.release();
    await rm(dir, { recursive: true, force: true });
  });
});

describe('all or nothing at start', () => {
  for (const taken of ['admin', 'api'] as const) {
    it(`with the ${taken} port taken, serve exits non-zero and releases the other port and the data folder`, async () => {
      const dir = await mkdtemp(join(tmpdir(), 'tg-start-ports-'));
      const { server, port } = await occupy();
      const other = await deadPort();
      const [apiPort, adminPort] = taken === 'api' ? [port, other] : [other, port];
      try {
        const r = await runCli(['serve', '--config', configDir, '--data', dir, '--port', String(apiPort), '--admin-port', String(adminPort)], ENV);
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(/EADDRINUSE/);
        expect(r.stderr).not.toContain('gateway listening');
        expect(await free(other)).toBe(true);
        const lock = await lockDataDir(join(dir, 'pg'));
        await lock.release();
      } finally {
        await new Promise<void>((res) => server.close(() => res()));
        await rm(dir, { recursive: true, force: true });
      }
    }, 90_000);
  }
});
