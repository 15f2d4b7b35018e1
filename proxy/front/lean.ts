import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { EventEmitter } from 'node:events';
import { DEFAULT_HEAD_LIMITS, parseHead, type HeadLimits, type LeanHead } from './lean-head.js';
import { LeanResponse } from './lean-response.js';

/**
 * The lean front (TOLLGATE_HTTP_FRONT=lean): the API server's connections are read here, and the
 * requests of the chat endpoints that fit a strict subset of HTTP/1.1 (lean-head.ts) are served
 * without node:http's server, whose JavaScript was about a sixth of the chat path's CPU with
 * billing off (bench/RESULTS.md, "a lean front"). Everything else goes to node:http on the same
 * socket, at a request boundary, with the bytes read so far given back (socket.unshift), and the
 * connection is node:http's from then on: what the subset leaves out (chunked bodies, Expect,
 * upgrades, HTTP/1.0, a malformed or oversized head, every other route) keeps node:http's answers.
 *
 * The requests reach the server's own 'request' listeners, so the pipeline, the in-flight count
 * and shutdown see them as node:http's. One request at a time per connection: a pipelined
 * request is read once the answer before it is finished, as node:http does.
 */

export interface LeanFrontOptions {
  /** The POST paths (no query) served lean: routes whose handlers use only LeanResponse's members. */
  paths: ReadonlySet<string>;
  limits?: HeadLimits;
}

export interface LeanFront {
  /** Connections being read by the front (not handed to node:http). */
  readonly connections: number;
  /** Closes the connections with no request in progress; the others close after their answers. */
  closeIdle(): void;
  closeAll(): void;
}

const BLANK = Buffer.from('\r\n\r\n', 'latin1');
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
    /** When the head being waited for began to arrive (ms): node:http's headersTimeout bounds it. */
    private headSince = 0;
    private readonly keepAlive = `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(server.keepAliveTimeout / 1000)}\r\n`;

    constructor(readonly socket: Socket) {
      live.add(this);
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
      return this.headSince > 0 && Date.now() - this.headSince > server.headersTimeout;
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
        if (buf.length > limits.maxHeadBytes) return this.handOff();
        if (this.headSince === 0) {
          this.headSince = Date.now();
          this.socket.setTimeout(server.headersTimeout);
        } else if (this.headLate()) this.socket.destroy();
        return;
      }
      this.headSince = 0;
      const head = parseHead(buf.toString('latin1', 0, blank + 4), blank, limits);
      if (!head || !opts.paths.has(pathOf(head.url)) || closing) return this.handOff();
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
      if (this.bodyLeft > 0) return; // the rest of the body is read (and dropped) first
      this.req = undefined;
      this.socket.resume();
      this.next();
    }

    /** node:http's from here: what was read of the next request is given back to the socket first. */
    private handOff(): void {
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
    get connections() {
      return live.size;
    },
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

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** Buffered body bytes past which the connection stops reading until the route takes them. */
const BODY_HIGH_WATER = 64 * 1024;

/**
 * The request: its body as the members of a Readable the lean routes use (proxy/http/body.ts:
 * the whole body taken with read() when it came with the head, else 'data' and 'end'), without a
 * stream's machinery, which was a sizable part of what the front saves (bench/RESULTS.md). Chunks
 * wait until the route reads them or listens; after resume() they are dropped as they come.
 */
class LeanRequest extends EventEmitter {
  readonly method = 'POST';
  readonly httpVersion = '1.1';
  readonly url: string;
  readonly headers: Record<string, string>;
  complete = false;
  destroyed = false;
  readableFlowing: boolean | null = null;
  readableDidRead = false;
  readableLength = 0;
  private chunks: Buffer[] = [];
  private ended = false;
  private endEmitted = false;
  private scheduled = false;

  constructor(
    head: LeanHead,
    readonly socket: Socket,
  ) {
    super();
    this.url = head.url;
    this.headers = head.headers;
  }

  /** A body chunk, or null at its end; false when the connection should stop reading for now. */
  push(chunk: Buffer | null): boolean {
    if (this.destroyed) return false;
    if (chunk === null) {
      this.ended = true;
      this.schedule();
      return false;
    }
    if (this.readableFlowing && this.readableLength === 0) {
      this.emit('data', chunk);
      return true;
    }
    this.chunks.push(chunk);
    this.readableLength += chunk.length;
    if (this.readableFlowing) this.schedule();
    return this.readableLength < BODY_HIGH_WATER;
  }

  /** All that is buffered, at once (proxy/http/body.ts takes a body that came whole this way). */
  read(): Buffer | null {
    this.readableDidRead = true;
    const { chunks } = this;
    if (chunks.length === 0) return null;
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.readableLength);
    this.chunks = [];
    this.readableLength = 0;
    this.socket.resume();
    if (this.ended) this.schedule();
    return all;
  }

  resume(): this {
    if (this.readableFlowing !== true) {
      this.readableFlowing = true;
      this.schedule();
      this.socket.resume();
    }
    return this;
  }

  override on(event: string | symbol, listener: Parameters<EventEmitter['on']>[1]): this {
    super.on(event, listener);
    if (event === 'data' && this.readableFlowing === null) this.resume();
    return this;
  }

  override addListener(event: string | symbol, listener: Parameters<EventEmitter['on']>[1]): this {
    return this.on(event, listener);
  }

  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.chunks = [];
    this.readableLength = 0;
    process.nextTick(() => this.emit('close'));
    return this;
  }

  // As a Readable: what is buffered goes out on a later tick, then the end, then 'close'.
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(() => this.flow());
  }

  private flow(): void {
    this.scheduled = false;
    if (this.destroyed) return;
    if (this.readableFlowing) {
      const { chunks } = this;
      this.chunks = [];
      this.readableLength = 0;
      for (const c of chunks) this.emit('data', c);
    }
    if (this.ended && this.readableLength === 0 && !this.endEmitted && (this.readableFlowing || this.readableDidRead)) {
      this.endEmitted = true;
      this.emit('end');
      this.destroyed = true;
      this.emit('close');
    }
  }
}
