import type { IncomingHttpHeaders } from 'node:http';

/** One request as the simulator received it: what tests inspect. */
export interface RecordedRequest {
  seq: number;
  method: string;
  path: string;
  query: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The client went away before the response ended. */
  aborted: boolean;
  /** The response was sent completely. */
  completed: boolean;
  /** The exact bytes of a `[sim:frayed]` stream as written (other answers are not kept). */
  sent?: Buffer;
}

/** The last requests received (bounded, so a long-running quickstart does not grow). */
export class Recorder {
  private items: RecordedRequest[] = [];
  private seq = 0;
  constructor(private readonly max = 1000) {}

  add(r: Omit<RecordedRequest, 'seq' | 'aborted' | 'completed'>): RecordedRequest {
    const rec: RecordedRequest = { ...r, seq: ++this.seq, aborted: false, completed: false };
    this.items.push(rec);
    if (this.items.length > this.max) this.items.splice(0, this.items.length - this.max);
    return rec;
  }

  all(): RecordedRequest[] {
    return [...this.items];
  }

  last(path?: string): RecordedRequest | undefined {
    for (let i = this.items.length - 1; i >= 0; i--) {
      const r = this.items[i]!;
      if (path === undefined || r.path === path) return r;
    }
    return undefined;
  }

  /** Requests whose body contains `marker` (tests tag requests with a unique string). */
  find(marker: string): RecordedRequest[] {
    return this.items.filter((r) => r.body.includes(marker));
  }

  clear(): void {
    this.items = [];
  }
}
