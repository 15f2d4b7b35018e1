import { EventEmitter } from 'node:events';
import { STATUS_CODES, type OutgoingHttpHeader, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { fieldValue, tokenKind } from './lean-head.js';

/**
 * The response of a request the lean front serves (lean.ts): the members of node:http's
 * ServerResponse that the routes it serves use, writing the same bytes node:http would (its head
 * fields in its order, Date, Connection and Keep-Alive after the route's own, chunked framing
 * unless a Content-Length is given, and the same checks of header names and values).
 */
export class LeanResponse extends EventEmitter {
  statusCode = 200;
  /** The request id, added to the head as GatewayResponse adds it. */
  requestId: string | undefined;
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  private fields: Map<string, [string, OutgoingHttpHeader]> | undefined;
  private head: string | undefined;
  private chunked = false;
  private noBody = false;
  private closeAfter = false;
  private closed = false;

  constructor(
    readonly socket: Socket,
    private readonly keepAlive: string,
    closing: boolean,
    private readonly done: (close: boolean) => void,
  ) {
    super();
    this.closeAfter = closing;
  }

  get destroyed(): boolean {
    return this.socket.destroyed;
  }

  setHeader(name: string, value: OutgoingHttpHeader): this {
    if (this.headersSent) throw Object.assign(new Error('Cannot set headers after they are sent to the client'), { code: 'ERR_HTTP_HEADERS_SENT' });
    const lower = checkField(name, value) === 2 ? name.toLowerCase() : name;
    (this.fields ??= new Map()).set(lower, [name, value]);
    return this;
  }

  getHeader(name: string): OutgoingHttpHeader | undefined {
    return this.fields?.get(name.toLowerCase())?.[1];
  }

  hasHeader(name: string): boolean {
    return this.fields?.has(name.toLowerCase()) ?? false;
  }

  removeHeader(name: string): void {
    this.fields?.delete(name.toLowerCase());
  }

  writeHead(statusCode: number, reason?: string | OutgoingHttpHeaders | OutgoingHttpHeader[], headers?: OutgoingHttpHeaders | OutgoingHttpHeader[]): this {
    if (this.headersSent) throw Object.assign(new Error('Cannot write headers after they are sent to the client'), { code: 'ERR_HTTP_HEADERS_SENT' });
    if (!Number.isInteger(statusCode) || statusCode < 100 || statusCode > 999) throw new RangeError(`Invalid status code: ${statusCode}`);
    let message: string | undefined;
    if (typeof reason === 'string') message = reason;
    else headers ??= reason;
    this.statusCode = statusCode;
    // As node:http: fields set earlier first, the ones given here after them (a name given again keeps its place).
    if (headers) {
      if (Array.isArray(headers)) throw new TypeError('the lean front takes a head as an object');
      for (const name in headers) {
        const v = headers[name];
        if (v !== undefined) this.setHeader(name, v);
      }
    }
    if (this.requestId !== undefined && !this.hasHeader('x-request-id')) this.setHeader('x-request-id', this.requestId);
    this.storeHead(message);
    return this;
  }

  /** Sends the head now (a stream's head with no event yet). */
  flushHeaders(): void {
    if (!this.headersSent) this.storeHead(undefined);
    this.sendHead();
  }

  write(chunk: Buffer | string): boolean {
    if (this.writableEnded) throw Object.assign(new Error('write after end'), { code: 'ERR_STREAM_WRITE_AFTER_END' });
    if (!this.headersSent) this.storeHead(undefined);
    const length = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (length === 0 || this.noBody) return this.sendHead();
    const s = this.socket;
    s.cork();
    this.sendHead();
    const ok = this.send(chunk, length);
    s.uncork();
    return ok;
  }

  end(chunk?: Buffer | string): this {
    if (this.writableEnded) return this;
    const s = this.socket;
    if (!this.headersSent) {
      // As node:http: an answer given whole to end() carries its length.
      const length = chunk === undefined ? 0 : typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
      this.storeHead(undefined, length);
    }
    this.writableEnded = true;
    s.cork();
    this.sendHead();
    // A socket that closed first fails the write: that response is not finished ('close' alone).
    const done = (err: Error | null | undefined) => {
      if (!err) this.finished();
    };
    const body = chunk !== undefined && chunk.length > 0 && !this.noBody;
    if (this.chunked) {
      if (body) this.send(chunk, typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length);
      s.write('0\r\n\r\n', 'latin1', done);
    } else if (body) s.write(chunk, done);
    else s.write('', 'latin1', done);
    s.uncork();
    return this;
  }

  cork(): void {
    this.socket.cork();
  }

  uncork(): void {
    this.socket.uncork();
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** The socket closed: a response not finished by then is the client gone. */
  socketClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.emit('close');
  }

  private send(chunk: Buffer | string, length: number): boolean {
    const s = this.socket;
    if (!this.chunked) return s.write(chunk);
    s.write(`${length.toString(16)}\r\n`, 'latin1');
    s.write(chunk);
    return s.write('\r\n', 'latin1');
  }

  private finished(): void {
    if (this.closed) return;
    this.writableFinished = true;
    this.emit('finish');
    this.closed = true;
    this.emit('close');
    this.done(this.closeAfter);
  }

  private sendHead(): boolean {
    const head = this.head;
    if (head === undefined) return true;
    this.head = undefined;
    return this.socket.write(head, 'latin1');
  }

  /** `implicitLength`: the length of an answer given whole to end() before any head. */
  private storeHead(message: string | undefined, implicitLength?: number): void {
    const status = this.statusCode;
    let head = `HTTP/1.1 ${status} ${message ?? STATUS_CODES[status] ?? 'unknown'}\r\n`;
    let length = false;
    let date = false;
    let connection = false;
    let encoding = false;
    if (this.fields) {
      for (const [lower, [name, value]] of this.fields) {
        if (Array.isArray(value)) for (const v of value) head += `${name}: ${v}\r\n`;
        else head += `${name}: ${value}\r\n`;
        if (lower === 'content-length') length = true;
        else if (lower === 'date') date = true;
        else if (lower === 'connection') {
          connection = true;
          if (/\bclose\b/i.test(String(value))) this.closeAfter = true;
        } else if (lower === 'transfer-encoding') encoding = true;
      }
    }
    if (!date) head += `Date: ${utcDate()}\r\n`;
    if (!connection) head += this.closeAfter ? 'Connection: close\r\n' : this.keepAlive;
    this.noBody = status === 204 || status === 304 || (status >= 100 && status < 200);
    if (!length && !encoding && !this.noBody && implicitLength !== undefined) head += `Content-Length: ${implicitLength}\r\n`;
    else if (!length && !encoding && !this.noBody) {
      head += 'Transfer-Encoding: chunked\r\n';
      this.chunked = true;
    } else if (encoding) this.chunked = /\bchunked\b/i.test(String(this.getHeader('transfer-encoding')));
    this.head = head + '\r\n';
    this.headersSent = true;
  }
}

/**
 * node:http's checks of a field: a name that is not a token, or a value with CR, LF or another
 * control character, throws. The name's kind: 2 when it has an upper-case letter.
 */
function checkField(name: string, value: OutgoingHttpHeader): number {
  const kind = tokenKind(name, 0, name.length);
  if (kind === 0) throw Object.assign(new TypeError(`Header name must be a valid HTTP token ["${name}"]`), { code: 'ERR_INVALID_HTTP_TOKEN' });
  if (Array.isArray(value)) {
    for (const v of value) checkValue(name, v);
  } else checkValue(name, value);
  return kind;
}

function checkValue(name: string, value: string | number): void {
  if (typeof value === 'number') return;
  if (!fieldValue(value, 0, value.length)) throw Object.assign(new TypeError(`Invalid character in header content ["${name}"]`), { code: 'ERR_INVALID_CHAR' });
}

let dateSecond = -1;
let dateText = '';
/** The Date field, made once a second as node:http makes it. */
function utcDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}
