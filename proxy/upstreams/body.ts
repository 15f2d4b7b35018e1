/**
 * An upstream request's body that undici lets go of once it has written it. undici keeps a
 * Buffer body referenced until the whole answer has arrived, so a stream of a minute held its
 * request for that minute: a coding agent's request runs to hundreds of KB, and a gateway holds
 * thousands of streams. Handed to undici as a one-shot iterable (with its content-length, so it
 * is not sent chunked), the bytes are dropped as they go out.
 */
export class OnceBody implements Iterable<Buffer>, Iterator<Buffer> {
  #bytes: Buffer | undefined;
  readonly length: number;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
    this.length = bytes.length;
  }

  [Symbol.iterator](): Iterator<Buffer> {
    return this;
  }

  next(): IteratorResult<Buffer> {
    const value = this.#bytes;
    this.#bytes = undefined;
    return value ? { value, done: false } : { value: undefined, done: true };
  }
}

/**
 * Bodies from this size on are passed once: below it undici's Buffer path costs less CPU (no
 * async writer per request) and holding the bytes costs little.
 */
export const ONCE_FROM_BYTES = 16 * 1024;

export type UpstreamBody = Buffer | OnceBody;

export function upstreamBody(bytes: Buffer): UpstreamBody {
  return bytes.length >= ONCE_FROM_BYTES ? new OnceBody(bytes) : bytes;
}
