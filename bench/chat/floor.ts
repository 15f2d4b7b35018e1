import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import type { FloorJournal } from './floor-journal.js';

/**
 * The bare Node proxy floor: node:http in front of an undici Pool to the simulator, bodies piped
 * both ways, nothing parsed, no auth, no billing: what any Node gateway pays at least. Returns
 * its URL and a close function. `connections`: the most upstream connections at once (more
 * requests wait in the pool). With a `journal` (the durable floor), each answer ends only once a
 * line for it is committed there: what any gateway that charges durably on that store pays at
 * least (a stream's events go out as they come and only its end waits; a JSON answer goes whole).
 */
export async function startFloor(target: string, connections = 256, journal?: FloorJournal): Promise<{ url: string; close(): Promise<void> }> {
  const pool = new Pool(target, { connections, keepAliveTimeout: 60_000 });
  let answers = 0;
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
        if (!journal) return void r.body.pipe(res);
        // A stream is piped and only its end waits; any other answer is sent whole after the commit.
        const held: Buffer[] = [];
        if (String(r.headers['content-type']).startsWith('text/event-stream')) r.body.pipe(res, { end: false });
        else r.body.on('data', (b: Buffer) => held.push(b));
        r.body.once('end', () => {
          // About the size of a gateway's charge line.
          const line = JSON.stringify({
            o: `floor:${++answers}`,
            a: 'bench',
            k: 'sha256:'.padEnd(71, '0'),
            m: 'sim-gpt',
            i: 180,
            out: 16,
            c: '123',
            t: Date.now(),
          });
          journal.append(line).then(
            () => res.end(held.length ? Buffer.concat(held) : undefined),
            () => res.destroy(),
          );
        });
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
