import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

/**
 * The bare Node proxy floor: node:http in front of an undici Pool to the simulator, bodies piped
 * both ways, nothing parsed, no auth, no billing: what any Node gateway pays at least. Returns
 * its URL and a close function. `connections`: the most upstream connections at once (more
 * requests wait in the pool).
 */
export async function startFloor(target: string, connections = 256): Promise<{ url: string; close(): Promise<void> }> {
  const pool = new Pool(target, { connections, keepAliveTimeout: 60_000 });
  const server = createServer((req, res) => {
    pool
      .request({
        method: 'POST',
        path: req.url!,
        headers: { 'content-type': 'application/json', 'content-length': req.headers['content-length'] ?? '0' },
        body: req,
      })
      .then((r) => {
        res.writeHead(r.statusCode, { 'content-type': String(r.headers['content-type'] ?? 'application/json') });
        r.body.pipe(res);
      })
      .catch(() => res.writeHead(502).end());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => void pool.close().finally(resolve))),
  };
}
