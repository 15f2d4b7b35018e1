import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Pool, type Dispatcher } from 'undici';

/**
 * The bare Node floor taken apart, for telling where its cost goes (opt-in bench targets):
 *
 * - floor-dispatch: node:http in front of undici's `dispatch()`, the body read whole and the
 *   answer written through the ServerResponse: the gateway's own two parts with nothing between
 *   them (the floor itself pipes streams through undici's `request()`).
 * - floor-net: the same `dispatch()` behind node:net with HTTP/1.1 framed by hand (a head up to
 *   its blank line, a Content-Length body, an answer's head and chunks written on the socket):
 *   what the floor would cost without node:http's server. It serves the bench's own requests and
 *   nothing else (no chunked bodies, no limits, no errors): not a server to put in front of anyone.
 */
export type FloorPart = 'dispatch' | 'net';

export async function startFloorPart(part: FloorPart, target: string, connections = 256): Promise<{ url: string; close(): Promise<void> }> {
  const pool = new Pool(target, { connections, keepAliveTimeout: 60_000 });
  const server = part === 'dispatch' ? dispatchServer(pool) : netServer(pool);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => void pool.close().finally(resolve))),
  };
}

const upstreamHeaders = (length: number) => ({ 'content-type': 'application/json', 'content-length': String(length) });
const contentType = (headers: Record<string, string | string[] | undefined>) => String(headers['content-type'] ?? 'application/json');

function dispatchServer(pool: Pool): Server {
  const server = createHttpServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => {
      const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
      pool.dispatch(
        { method: 'POST', path: req.url!, headers: upstreamHeaders(body.length), body },
        {
          onRequestStart() {},
          onResponseStart(_c, status, headers) {
            res.writeHead(status, { 'content-type': contentType(headers) });
          },
          onResponseData(_c, chunk) {
            res.write(chunk);
          },
          onResponseEnd() {
            res.end();
          },
          onResponseError() {
            res.destroy();
          },
        },
      );
    });
  });
  server.keepAliveTimeout = 60_000;
  return server;
}

function netServer(pool: Pool): Server {
  return createNetServer({ noDelay: true }, (sock: Socket) => {
    let buf: Buffer | undefined;
    let busy = false;
    // One request at a time per connection, the next (pipelined) one once this one's answer ended.
    const next = () => {
      busy = false;
      take();
    };
    const take = () => {
      if (busy || !buf) return;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.toString('latin1', 0, end);
      const length = Number(/\r\ncontent-length:[ \t]*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const body = buf.subarray(end + 4, end + 4 + length);
      const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' ', head.indexOf(' ') + 1));
      buf = buf.length > end + 4 + length ? buf.subarray(end + 4 + length) : undefined;
      busy = true;
      pool.dispatch({ method: 'POST', path, headers: upstreamHeaders(length), body }, new SocketAnswer(sock, next));
    };
    sock.on('data', (chunk: Buffer) => {
      buf = buf ? Buffer.concat([buf, chunk]) : chunk;
      take();
    });
    sock.on('error', () => sock.destroy());
  });
}

/** An upstream answer written on the client's socket: its head with its first chunk, chunks gathered per tick as node:http does. */
class SocketAnswer implements Dispatcher.DispatchHandler {
  private head = '';
  private chunked = false;
  private corked = false;

  constructor(
    private readonly sock: Socket,
    private readonly done: () => void,
  ) {}

  onRequestStart(): void {}

  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: Record<string, string | string[] | undefined>): void {
    const length = headers['content-length'];
    this.chunked = length === undefined;
    this.head = `HTTP/1.1 ${status} OK\r\ncontent-type: ${contentType(headers)}\r\n${this.chunked ? 'transfer-encoding: chunked' : `content-length: ${String(length)}`}\r\nconnection: keep-alive\r\n\r\n`;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    const s = this.sock;
    if (!this.corked) {
      this.corked = true;
      s.cork();
      process.nextTick(() => {
        this.corked = false;
        s.uncork();
      });
    }
    this.flushHead();
    if (this.chunked) s.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
    s.write(chunk);
    if (this.chunked) s.write('\r\n', 'latin1');
  }

  onResponseEnd(): void {
    this.flushHead();
    if (this.chunked) this.sock.write('0\r\n\r\n', 'latin1');
    this.done();
  }

  onResponseError(): void {
    this.sock.destroy();
  }

  private flushHead(): void {
    if (!this.head) return;
    this.sock.write(this.head, 'latin1');
    this.head = '';
  }
}
