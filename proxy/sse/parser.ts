/**
 * A byte-level, incremental Server-Sent Events parser (WHATWG event-stream rules) built to sit
 * beside a passthrough: the caller forwards every byte unaltered and pushes the same Buffers here;
 * the parser only reports events to a tap. It reads each chunk once as text (below) and joins
 * bytes only for a line that spans chunks.
 *
 * - Line ends: \n, \r\n and \r, including a \r at the end of one chunk and its \n in the next.
 * - Comments (lines starting with ":") are skipped; fields other than event/data/id are ignored.
 * - An event larger than maxEventBytes is dropped (reported once through onOverflow) and the
 *   parser resynchronises at the next blank line; memory stays bounded whatever the upstream sends.
 */
import { isAscii } from 'node:buffer';

export interface SseParserOptions {
  /** Largest event (all its lines, in bytes) the parser buffers. Default 16 MiB. */
  maxEventBytes?: number;
  onOverflow?(bytes: number): void;
}

/** Called once per dispatched event. `event` is "" when the event had no event: field. */
export type SseListener = (event: string, data: string, id: string | undefined) => void;

const LF = 10;
const CR = 13;
const COLON = 58;
const SPACE = 32;

// A chunk is scanned as a latin1 string, one character per byte, so that its offsets are the
// chunk's byte offsets: a string's indexOf is V8's own, where a Buffer's crosses into Node's
// bindings on each call (several per event). A field's value is a slice of that string when the
// chunk is ASCII, else decoded from the bytes as UTF-8. Counted by callgrind on a chunk of 15
// chat completion events: 45k instructions before, 29k after; with non-ASCII text 3-4% more
// (the latin1 copy is then extra).

export class SseParser {
  private readonly max: number;
  /** Bytes of the current line seen in earlier chunks. */
  private partial: Buffer[] = [];
  private partialLen = 0;
  /** The previous chunk ended with \r: a \n starting the next chunk belongs to it. */
  private afterCR = false;
  private event = '';
  private data: string[] = [];
  private hasData = false;
  private id: string | undefined;
  /** Bytes of the event being read (lines already complete plus the current partial line). */
  private eventBytes = 0;
  private discarding = false;
  /** The line being read began in an earlier chunk. */
  private midLine = false;
  /** Number of events dispatched so far. */
  events = 0;
  /**
   * While a listener runs: the offset in the chunk being pushed where the event being dispatched
   * began, or -1 when it began in an earlier chunk. A relay holding back a terminal event uses it
   * to send the events before it at once.
   */
  chunkEventStart = -1;

  constructor(
    private readonly listener: SseListener,
    private readonly opts: SseParserOptions = {},
  ) {
    this.max = opts.maxEventBytes ?? 16 * 1024 * 1024;
  }

  /**
   * Consumes one chunk. Returns how many bytes at the end of this chunk belong to an event that
   * is not complete yet (0 when the chunk ends on an event boundary; chunk.length when the whole
   * chunk continues an unfinished event). A passthrough can write up to that point and hold the
   * rest, so the client only ever sees whole events.
   */
  push(chunk: Buffer): number {
    const len = chunk.length;
    let pos = 0;
    if (this.afterCR) {
      this.afterCR = false;
      if (len > 0 && chunk[0] === LF) pos = 1;
    }
    let boundary = -1; // end offset (exclusive) of the last completed event in this chunk
    this.chunkEventStart = this.eventBytes > 0 || this.discarding || this.midLine ? -1 : pos;
    const text = chunk.toString('latin1');
    const ascii = isAscii(chunk);
    const hasCR = text.indexOf('\r', pos) !== -1;
    while (pos < len) {
      let end: number;
      let next: number;
      if (!hasCR) {
        end = text.indexOf('\n', pos);
        if (end === -1) break;
        next = end + 1;
      } else {
        end = pos;
        let c = text.charCodeAt(end);
        while (end < len && c !== LF && c !== CR) c = text.charCodeAt(++end);
        if (end === len) break;
        if (text.charCodeAt(end) === CR) {
          if (end + 1 < len) next = text.charCodeAt(end + 1) === LF ? end + 2 : end + 1;
          else {
            next = len;
            this.afterCR = true;
          }
        } else next = end + 1;
      }
      if (this.line(chunk, text, ascii, pos, end)) boundary = this.chunkEventStart = next;
      else if (this.eventBytes === 0 && !this.discarding) this.chunkEventStart = next; // a blank line between events
      pos = next;
    }
    if (pos < len) {
      const rest = len - pos;
      this.midLine = true;
      if (!this.discarding) {
        this.eventBytes += rest;
        if (this.eventBytes > this.max) this.overflow();
        else {
          this.partial.push(pos === 0 ? chunk : chunk.subarray(pos));
          this.partialLen += rest;
        }
      }
    }
    if (boundary === -1) return this.eventBytes === 0 && !this.discarding ? 0 : len;
    return len - boundary;
  }

  /** Input ended: an unterminated last event is discarded, as the WHATWG rules say. */
  end(): void {
    this.partial = [];
    this.partialLen = 0;
    this.midLine = false;
    this.afterCR = false;
    this.reset();
  }

  /** True when bytes of an unfinished event are buffered. */
  get pending(): boolean {
    return this.eventBytes > 0 || this.discarding;
  }

  /** Handles one complete line; returns true when it ended an event (a blank line). */
  private line(chunk: Buffer, chunkText: string, chunkAscii: boolean, start: number, end: number): boolean {
    const midLine = this.midLine;
    this.midLine = false;
    if (!this.discarding) this.eventBytes += end - start + 1;
    if (!midLine && end === start) {
      const wasEvent = this.eventBytes > 1 || this.discarding;
      if (!this.discarding && this.hasData) this.dispatch();
      this.reset();
      return wasEvent;
    }
    if (this.discarding) return false;
    if (this.eventBytes > this.max) {
      this.overflow();
      return false;
    }
    let buf = chunk;
    let text = chunkText;
    let ascii = chunkAscii;
    if (this.partialLen > 0) {
      this.partial.push(chunk.subarray(start, end));
      buf = Buffer.concat(this.partial, this.partialLen + end - start);
      text = buf.toString('latin1');
      ascii = isAscii(buf);
      start = 0;
      end = buf.length;
      this.partial = [];
      this.partialLen = 0;
    }
    const first = text.charCodeAt(start);
    if (first === COLON) return false; // comment
    let colon = text.indexOf(':', start);
    if (colon === -1 || colon >= end) colon = end;
    let vstart = colon + 1;
    if (vstart < end && text.charCodeAt(vstart) === SPACE) vstart++;
    const flen = colon - start;
    if (flen === 4 && text.startsWith('data', start)) {
      this.data.push(fieldValue(buf, text, ascii, vstart, end));
      this.hasData = true;
    } else if (flen === 5 && text.startsWith('event', start)) {
      this.event = fieldValue(buf, text, ascii, vstart, end);
    } else if (flen === 2 && text.startsWith('id', start)) {
      this.id = fieldValue(buf, text, ascii, vstart, end);
    }
    return false;
  }

  private dispatch(): void {
    const data = this.data.length === 1 ? this.data[0]! : this.data.join('\n');
    this.events++;
    this.listener(this.event, data, this.id);
  }

  private overflow(): void {
    if (!this.discarding) this.opts.onOverflow?.(this.eventBytes);
    this.discarding = true;
    this.partial = [];
    this.partialLen = 0;
    this.data = [];
    this.hasData = false;
  }

  private reset(): void {
    this.event = '';
    this.data = [];
    this.hasData = false;
    this.eventBytes = 0;
    this.discarding = false;
  }
}

/** A field's value, bytes [start, end) of a line: `text` is `buf` read as latin1. */
function fieldValue(buf: Buffer, text: string, ascii: boolean, start: number, end: number): string {
  if (start >= end) return '';
  return ascii ? text.slice(start, end) : buf.toString('utf8', start, end);
}
