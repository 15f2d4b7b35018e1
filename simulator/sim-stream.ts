import { sleep, type Directives } from './directives.js';
import type { SimRequest } from './server.js';

/**
 * Writes one simulated SSE answer event by event: the chunk delay between events, and the
 * failure directives at the middle of the content (after `failAfter` content events): `[sim:cut]`
 * drops the connection without a terminal event, `[sim:fail]` sends the protocol's own in-stream
 * error event and ends cleanly. Every method returns false once the answer must stop.
 */
export class SimStream {
  private content = 0;
  private stopped = false;

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
        r.res.end(typeof this.errorFrame === 'string' ? this.errorFrame : this.errorFrame());
        return false;
      }
      // Let what was written reach the client, then drop the connection without an end.
      await sleep(20);
      r.res.destroy();
      return false;
    }
    if (r.sim.chunkDelayMs > 0) {
      await sleep(r.sim.chunkDelayMs, r.signal);
      if (r.signal.aborted) return false;
    }
    r.res.write(frame);
    if (content) this.content++;
    return true;
  }

  end(frame: string): void {
    if (this.stopped || this.r.signal.aborted) return;
    this.stopped = true;
    this.r.res.end(frame);
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
