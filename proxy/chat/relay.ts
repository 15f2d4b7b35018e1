import type { ServerResponse } from 'node:http';
import type { StreamTap } from '../protocols/index.js';
import { SseParser } from '../sse/index.js';

/**
 * Streams an upstream SSE body to the client unaltered while a protocol tap reads usage from
 * the same bytes. Only whole events are written, so an in-stream error added after a failure
 * never lands inside a half-written event. The protocol's terminal event (and anything after it)
 * is held back and returned: the caller settles the charge first and then sends it, so a client
 * that has seen the end of its stream has been charged durably.
 */
export interface RelayResult {
  /** The upstream body ended normally (or was drained to its end). */
  ended: boolean;
  /** The client went away. */
  clientGone: boolean;
  /** Set when reading the upstream failed (cut connection, body timeout). */
  error?: unknown;
  /** Bytes not yet written: the terminal event and anything after it, or an unfinished event. */
  held: Buffer[];
  /** hrtime of the first byte written to the client. */
  firstByteAt?: bigint;
}

export interface RelayOptions {
  res: ServerResponse;
  body: AsyncIterable<Buffer>;
  tap: StreamTap;
  /** Aborted when the client goes away. */
  clientSignal: AbortSignal;
  /** Keep reading the upstream after the client left (disconnect policy `drain`). */
  drain: boolean;
}

export async function relayStream(o: RelayOptions): Promise<RelayResult> {
  const { res, tap } = o;
  let terminal = false;
  // Where, in the chunk being pushed, the terminal event begins (-1: in an earlier chunk).
  let terminalAt = -1;
  // Events whose accounting (usage, text bytes) waits until their chunk has been sent: where to
  // split needs only the terminal check. Counted by callgrind on a chunk of 15 chat completion
  // events (Node 24): parsing 26k instructions, the terminal checks 3k, the accounting 35k, which
  // was all before the chunk's first byte.
  const unread: string[] = [];
  const parser = new SseParser((event, data) => {
    if (!terminal && tap.ends(event, data)) {
      terminal = true;
      terminalAt = parser.chunkEventStart;
    }
    unread.push(event, data);
  });
  // A tap that throws fails the stream as a failed read of the upstream would, never the process
  // (a tick's exception is uncaught): kept here and thrown in the loop.
  let unreadable: { error: unknown } | undefined;
  const read = () => {
    try {
      for (let i = 0; i < unread.length; i += 2) tap.event(unread[i]!, unread[i + 1]!);
    } catch (error) {
      unreadable ??= { error };
    } finally {
      unread.length = 0;
    }
  };
  const readNow = () => {
    read();
    if (unreadable) throw unreadable.error;
  };
  let pending: Buffer[] = [];
  let firstByteAt: bigint | undefined;
  let clientGone = o.clientSignal.aborted;
  const write = async (bufs: Buffer[]) => {
    if (clientGone || bufs.length === 0) return;
    firstByteAt ??= process.hrtime.bigint();
    const data = bufs.length === 1 ? bufs[0]! : Buffer.concat(bufs);
    coalesce(res);
    // Queued after coalesce's uncork: the events are read once they are on their way.
    process.nextTick(read);
    if (!res.write(data)) await drained(res, o.clientSignal);
    if (o.clientSignal.aborted) clientGone = true;
  };
  try {
    for await (const chunk of o.body) {
      readNow(); // a chunk that was not written (held, or the client gone) is read by the next one
      if (o.clientSignal.aborted) {
        clientGone = true;
        if (!o.drain) break;
      }
      const wasTerminal = terminal;
      const tail = parser.push(chunk);
      if (clientGone) {
        pending = [];
        continue;
      }
      if (terminal) {
        // From the terminal event on, everything waits for settlement; the events before it in
        // the same chunk go out now (a stream that arrives in one piece still shows its first
        // events before the charge is written).
        if (!wasTerminal && terminalAt > 0) {
          pending.push(chunk.subarray(0, terminalAt));
          const out = pending;
          pending = [chunk.subarray(terminalAt)];
          await write(out);
          continue;
        }
        pending.push(chunk);
        continue;
      }
      if (tail === chunk.length) {
        pending.push(chunk);
        continue;
      }
      pending.push(tail === 0 ? chunk : chunk.subarray(0, chunk.length - tail));
      const out = pending;
      pending = tail === 0 ? [] : [chunk.subarray(chunk.length - tail)];
      await write(out);
    }
    parser.end();
    // A stream that ended in the burst that carried its last events: they are sent (the uncork,
    // then read(), queued as ticks) before the caller settles.
    if (unread.length > 0) await new Promise<void>((resolve) => process.nextTick(resolve));
    readNow();
    return { ended: !clientGone || o.drain, clientGone, held: clientGone ? [] : pending, firstByteAt };
  } catch (error) {
    parser.end();
    read();
    clientGone ||= o.clientSignal.aborted;
    // A half event is dropped: the caller appends the protocol's error event instead.
    const whole = terminal ? pending : [];
    return { ended: false, clientGone, error: clientGone ? undefined : error, held: clientGone ? [] : whole, firstByteAt };
  }
}

/**
 * A stream's head waits for its first events, so that both leave in one write (the head alone was
 * a syscall of its own, about a tenth of a relayed stream's CPU), as Node sends a head by default;
 * an upstream that sends its head and then nothing for HEAD_WAIT_MS still has it sent then. The
 * heads held share one timer: a timer per stream, set and cleared µs later as its first events
 * came, was on every stream's way to its first byte (10-13 µs of the stage probe's, 4-5 with one).
 */
const HEAD_WAIT_MS = 25;
/** Held heads and when each was held (ms, performance.now()): in that order, as a Map iterates. */
const heads = new Map<ServerResponse, number>();
let headTimer: NodeJS.Timeout | undefined;

export function holdHead(res: ServerResponse): void {
  heads.set(res, performance.now());
  headTimer ??= setTimeout(flushHeads, HEAD_WAIT_MS);
}

function flushHeads(): void {
  headTimer = undefined;
  const now = performance.now();
  for (const [res, at] of heads) {
    if (now - at < HEAD_WAIT_MS) {
      headTimer = setTimeout(flushHeads, HEAD_WAIT_MS - (now - at));
      return;
    }
    heads.delete(res);
    if (!res.destroyed && !res.writableEnded) res.flushHeaders();
  }
}

function releaseHead(res: ServerResponse): void {
  heads.delete(res);
}

/**
 * Events that are already buffered arrive in one burst of microtasks; corking until the next
 * tick sends them (and the response head before them) in one writev instead of a syscall each.
 * Nothing waits for later input, so no event is delayed.
 */
const corked = new WeakSet<ServerResponse>();
export function coalesce(res: ServerResponse): void {
  if (corked.has(res)) return;
  releaseHead(res);
  corked.add(res);
  res.cork();
  process.nextTick(uncork, res);
}

/**
 * Sends what coalesce() holds, now. Call it before end(): Node 24's end() on a corked chunked
 * response writes the terminating chunk without what the cork buffered (the client got an empty
 * stream when the whole answer came within one tick).
 */
export function uncork(res: ServerResponse): void {
  releaseHead(res);
  if (corked.delete(res)) res.uncork();
}

/** The response can take more (drain), or will never (closed, or the client left). */
export function drained(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
