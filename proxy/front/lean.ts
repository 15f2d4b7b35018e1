import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { DEFAULT_HEAD_LIMITS, parseHead, type HeadLimits, type LeanHead } from './lean-head.js';
import { LeanResponse } from './lean-response.js';

/**
 * The lean front (the default; TOLLGATE_HTTP_FRONT=node turns it off): the API server's
 * connections are read here, and the requests of the chat endpoints that fit a strict subset of
 * HTTP/1.1 (lean-head.ts) are served without node:http's server (as landed: about 4% fewer
 * instructions per request with billing off, up to a tenth less CPU per request under load;
 * bench/RESULTS.md, "the lean front lands, opt-in" and "the lean front becomes the default").
 * Everything else goes to node:http on the same socket, at a request boundary, with the bytes read
 * so far given back (socket.unshift), and the connection is node:http's from then on: what the
 * subset leaves out (chunked bodies, Expect, upgrades, HTTP/1.0, a malformed or oversized head,
 * every other route) keeps node:http's answers.
 *
 * The requests reach the server's own 'request' listeners, so the pipeline, the in-flight count
 * and shutdown see them as node:http's. One request at a time per connection: a pipelined
 * request is read once the answer before it is finished, as node:http does.
 */

/**
 * Why a connection went to node:http: `method`, a request other than POST (Claude Code's
 * `HEAD /`, a WebSocket's GET); `route`, a POST for a path the front does not serve; `head`, a
 * POST head outside the subset (chunked, Expect, HTTP/1.0, Connection: close, malformed, over
 * the limits); `closing`, the gateway shutting down.
 */
export type HandOffReason = 'method' | 'route' | 'head' | 'closing';
export const HAND_OFF_REASONS: readonly HandOffReason[] = ['method', 'route', 'head', 'closing'];

export interface LeanFrontOptions {
  /** The POST paths (no query) served lean: routes whose handlers use only LeanResponse's members. */
  paths: ReadonlySet<string>;
  limits?: HeadLimits;
  /** Once for each connection the front reads, and once for each it hands to node:http: never once a request. */
  onConnection?: () => void;
  onHandOff?: (reason: HandOffReason) => void;
}

export interface LeanFront {
  /** Closes the connections with no request in progress; the others close after their answers. */
  closeIdle(): void;
  closeAll(): void;
}

const BLANK = Buffer.from('\r\n\r\n', 'latin1');
const POST = Buffer.from('POST ', 'latin1');
/** More unread bytes than this while an answer is in progress pauses the socket. */
const MAX_BUFFERED = 64 * 1024;

export function installLeanFront(server: Server, opts: LeanFrontOptions): LeanFront {
  const limits = opts.limits ?? DEFAULT_HEAD_LIMITS;
  const [first, ...others] = server.listeners('connection') as ((socket: Socket) => void)[];
  if (!first || others.length > 0) throw new Error("the lean front expects node:http's own connection listener alone");
  const nodeConnection = first;
  server.removeListener('connection', nodeConnection);
  const live = new Set<Connection>();
  let closing = false;

  class Connection {
    private buf: Buffer | undefined;
    private req: LeanRequest | undefined;
    private res: LeanResponse | undefined;
    private bodyLeft = 0;
    /**
     * When the head being waited for began to arrive (ms, the monotonic clock, as node:http's own
     * headersTimeout check reads it: a step of the wall clock neither cuts a head off nor spares it).
     */
    private headSince = 0;
    private readonly keepAlive = `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(server.keepAliveTimeout / 1000)}\r\n`;

    constructor(readonly socket: Socket) {
      live.add(this);
      opts.onConnection?.();
      for (const [event, listener] of this.listeners()) socket.on(event, listener);
      this.idle();
    }

    private listeners(): [string, Parameters<Socket['removeListener']>[1]][] {
      return [
        ['data', this.onData],
        ['close', this.onClose],
        ['end', this.onEnd],
        ['error', this.onError],
        ['drain', this.onDrain],
        ['timeout', this.onTimeout],
      ];
    }

    get busy(): boolean {
      return this.res !== undefined || this.bodyLeft > 0;
    }

    private readonly onData = (chunk: Buffer) => {
      if (this.bodyLeft > 0) {
        const take = Math.min(this.bodyLeft, chunk.length);
        this.body(take === chunk.length ? chunk : chunk.subarray(0, take));
        if (take === chunk.length) return;
        chunk = chunk.subarray(take);
      }
      this.buf = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
      if (!this.busy) this.next();
      else if (this.buf.length > MAX_BUFFERED) this.socket.pause();
    };

    private readonly onClose = () => {
      live.delete(this);
      const { req, res } = this;
      this.req = this.res = undefined;
      if (req && !req.complete) req.destroy();
      res?.socketClosed();
    };

    // The client's end of the connection: as node:http's server (without httpAllowHalfOpen), ours
    // ends too, and an answer in progress is the client gone once the socket closes.
    private readonly onEnd = () => this.socket.end();

    // node:http's server destroys a socket on its errors too; 'close' follows.
    private readonly onError = () => this.socket.destroy();

    private readonly onDrain = () => this.res?.emit('drain');

    private readonly onTimeout = () => {
      if (!this.busy || this.headLate()) this.socket.destroy();
    };

    private headLate(): boolean {
      return this.headSince > 0 && performance.now() - this.headSince > server.headersTimeout;
    }

    private idle(): void {
      this.socket.setTimeout(server.keepAliveTimeout);
    }

    /** Body bytes of the request being read. */
    private body(bytes: Buffer): void {
      const req = this.req!;
      this.bodyLeft -= bytes.length;
      const more = req.push(bytes);
      if (this.bodyLeft === 0) {
        req.complete = true;
        req.push(null);
        if (!this.res) this.next();
      } else if (!more) this.socket.pause();
    }

    /** Reads the next request from what is buffered, or waits for it. */
    next(): void {
      const buf = this.buf;
      if (!buf) return this.idle();
      const blank = buf.indexOf(BLANK);
      if (blank === -1) {
        // A head still arriving (a long one over a network with a small MSS): wait, up to the
        // size limit and node:http's headersTimeout (a head sent a byte at a time is cut off).
        if (buf.length > limits.maxHeadBytes) return this.handOff(methodOr(buf, 'head'));
        if (this.headSince === 0) {
          this.headSince = performance.now();
          this.socket.setTimeout(server.headersTimeout);
        } else if (this.headLate()) this.socket.destroy();
        return;
      }
      this.headSince = 0;
      if (closing) return this.handOff('closing');
      const head = parseHead(buf.toString('latin1', 0, blank + 4), blank, limits);
      if (!head) return this.handOff(methodOr(buf, 'head'));
      if (!opts.paths.has(pathOf(head.url))) return this.handOff('route');
      this.socket.setTimeout(0);
      this.serve(head, buf);
    }

    private serve(head: LeanHead, buf: Buffer): void {
      const socket = this.socket;
      const req = new LeanRequest(head, socket);
      const res = new LeanResponse(socket, this.keepAlive, closing, (close) => this.finished(close));
      this.req = req;
      this.res = res;
      this.bodyLeft = head.contentLength;
      const rest = buf.length - head.size;
      this.buf = undefined;
      if (this.bodyLeft === 0) {
        req.complete = true;
        req.push(null);
      } else if (rest > 0) {
        const take = Math.min(this.bodyLeft, rest);
        this.bodyLeft -= take;
        req.push(buf.subarray(head.size, head.size + take));
        if (this.bodyLeft === 0) {
          req.complete = true;
          req.push(null);
        }
      }
      if (rest > 0 && buf.length > head.size + head.contentLength) this.buf = buf.subarray(head.size + head.contentLength);
      if (this.buf && this.buf.length > MAX_BUFFERED) socket.pause();
      server.emit('request', req, res);
    }

    private finished(close: boolean): void {
      this.res = undefined;
      if (close || closing) {
        this.req = undefined;
        this.socket.end();
        return;
      }
      if (this.bodyLeft > 0) {
        // The rest of a body the route did not read is read and dropped first, as node:http dumps it.
        this.req?.resume();
        this.socket.resume();
        return;
      }
      this.req = undefined;
      this.socket.resume();
      this.next();
    }

    /** node:http's from here: what was read of the next request is given back to the socket first. */
    private handOff(reason: HandOffReason): void {
      opts.onHandOff?.(reason);
      const socket = this.socket;
      live.delete(this);
      socket.setTimeout(0);
      for (const [event, listener] of this.listeners()) socket.removeListener(event, listener);
      socket.pause();
      if (this.buf) socket.unshift(this.buf);
      this.buf = undefined;
      nodeConnection.call(server, socket);
      socket.resume();
    }

    close(): void {
      if (!this.busy) this.socket.destroy();
    }
  }

  server.on('connection', (socket: Socket) => {
    if (closing) return nodeConnection.call(server, socket);
    new Connection(socket);
  });

  return {
    closeIdle() {
      closing = true;
      for (const c of live) c.close();
    },
    closeAll() {
      closing = true;
      for (const c of live) c.socket.destroy();
    },
  };
}

/** `method` for a request line that is not a POST's, else `otherwise`. */
function methodOr(buf: Buffer, otherwise: HandOffReason): HandOffReason {
  return buf.length >= POST.length && buf.compare(POST, 0, POST.length, 0, POST.length) !== 0 ? 'method' : otherwise;
}

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** The request: a Readable of its body with the members of IncomingMessage the lean routes read. */
class LeanRequest extends Readable {
  readonly method = 'POST';
  readonly httpVersion = '1.1';
  readonly url: string;
  readonly headers: Record<string, string>;
  complete = false;

  constructor(
    head: LeanHead,
    readonly socket: Socket,
  ) {
    super();
    this.url = head.url;
    this.headers = head.headers;
  }

  override _read(): void {
    this.socket.resume();
  }
}
