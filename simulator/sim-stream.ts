import { sleep, type Directives } from './directives.js';
import type { SimRequest } from './server.js';

/**
 * Writes one simulated SSE answer event by event: the chunk delay between events, and the
 * failure directives at the middle of the content (after `failAfter` content events): `[sim:cut]`
 * drops the connection without a terminal event, `[sim:fail]` sends the protocol's own in-stream
 * error event and ends cleanly. Every method returns false once the answer must stop.
 */
/** What `[sim:frayed]` adds after the first event: a comment and an event no client knows. */
const FRAYED_EXTRAS = ': keep-alive comment\r\n\r\nevent: future_event\r\ndata: {"type":"future_event","x":1}\r\nid: 9\r\n\r\n';

export class SimStream {
  private content = 0;
  private stopped = false;
  private events = 0;
  private paused = false;

  constructor(
    private readonly r: SimRequest,
    private readonly d: Directives,
    private readonly failAfter: number,
    /** The error event; a function when it depends on how far the stream got. */
    private readonly errorFrame: string | (() => string),
  ) {}

  /** `content`: an event carrying model output (a delta), where failures strike. */
  async send(frame: string, content = false): Promise<boolean> {
    const { r } = this;
    if (this.stopped || r.signal.aborted) return false;
    if (content && this.content >= this.failAfter && (this.d.cut || this.d.fail)) {
      this.stopped = true;
      if (this.d.fail) {
        r.res.end(this.wire(typeof this.errorFrame === 'string' ? this.errorFrame : this.errorFrame()));
        return false;
      }
      // Let what was written reach the client, then drop the connection without an end.
      await sleep(20);
      r.res.destroy();
      return false;
    }
    if (this.d.pauseMs > 0 && !this.paused) {
      this.paused = true;
      r.res.flushHeaders();
      await sleep(this.d.pauseMs, r.signal);
      if (r.signal.aborted) return false;
    }
    if (r.sim.chunkDelayMs > 0) {
      await sleep(r.sim.chunkDelayMs, r.signal);
      if (r.signal.aborted) return false;
    }
    if (this.d.frayed) await this.fray(frame);
    else r.res.write(frame);
    if (content) this.content++;
    return true;
  }

  end(frame: string): void {
    if (this.stopped || this.r.signal.aborted) return;
    this.stopped = true;
    this.r.res.end(this.wire(frame));
  }

  /** A frame as it goes on the wire: as built, or frayed (CRLF) and recorded. */
  private wire(frame: string): string | Buffer {
    if (!this.d.frayed) return frame;
    // Some compatible servers send the type in the data only: no `event:` lines.
    let text = frame.replace(/^event: [^\n]*\n/gm, '').replace(/\n/g, '\r\n');
    if (this.events++ === 0) text += FRAYED_EXTRAS;
    const bytes = Buffer.from(text);
    const rec = this.r.record;
    rec.sent = rec.sent ? Buffer.concat([rec.sent, bytes]) : bytes;
    return bytes;
  }

  /** `[sim:frayed]`: 7-byte pieces, each on its own turn of the event loop, so they arrive apart. */
  private async fray(frame: string): Promise<void> {
    const bytes = this.wire(frame) as Buffer;
    for (let i = 0; i < bytes.length && !this.r.signal.aborted; i += 7) {
      this.r.res.write(bytes.subarray(i, i + 7));
      await new Promise(setImmediate);
    }
  }
}

export const sseHeaders = (requestIdHeader: string, id: string): Record<string, string> => ({
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  [requestIdHeader]: id,
});

export function sendJson(r: SimRequest, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(value);
  r.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  r.res.end(body);
}
