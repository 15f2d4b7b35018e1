import { Transform } from 'node:stream';

/** The largest `moov` box read (the movie header is a few KB; sample tables of long videos, a few MB). */
const MAX_MOOV = 16 * 1024 * 1024;

/**
 * A pass-through that reads an MP4's duration while it streams by: it walks the top-level
 * ISO-BMFF boxes, skips `mdat` (the media, however large) without keeping it, and reads `mvhd`
 * (timescale and duration) inside `moov`, wherever `moov` sits. Memory stays bounded by the size
 * of `moov`. Not an MP4, or no `mvhd`: seconds() is undefined and the bytes still pass.
 */
export function mp4DurationProbe(): { tap: Transform; seconds(): number | undefined } {
  let head = Buffer.alloc(0); // bytes of a box header being read
  let skip = 0; // bytes left of a box being skipped
  let moov: Buffer[] | undefined; // a moov box being collected
  let moovLeft = 0;
  let done = false;
  let seconds: number | undefined;

  const feed = (chunk: Buffer) => {
    let pos = 0;
    while (!done && pos < chunk.length) {
      if (skip > 0) {
        const n = Math.min(skip, chunk.length - pos);
        skip -= n;
        pos += n;
        continue;
      }
      if (moov) {
        const n = Math.min(moovLeft, chunk.length - pos);
        moov.push(chunk.subarray(pos, pos + n));
        moovLeft -= n;
        pos += n;
        if (moovLeft === 0) {
          seconds = mvhdSeconds(Buffer.concat(moov));
          moov = undefined;
          done = true;
        }
        continue;
      }
      const need = head.length < 8 ? 8 : head.readUInt32BE(0) === 1 ? 16 : 8;
      const n = Math.min(need - head.length, chunk.length - pos);
      head = Buffer.concat([head, chunk.subarray(pos, pos + n)]);
      pos += n;
      if (head.length < need) continue;
      const small = head.readUInt32BE(0);
      if (small === 1 && head.length < 16) continue;
      const type = head.toString('latin1', 4, 8);
      const size = small === 1 ? Number(head.readBigUInt64BE(8)) : small;
      const body = size - head.length;
      head = Buffer.alloc(0);
      // size 0 runs to the end of the file; a size smaller than its header is not ISO-BMFF.
      if (size === 0 || body < 0 || !/^[\x20-\x7e]{4}$/.test(type)) {
        done = true;
      } else if (type === 'moov') {
        if (body > MAX_MOOV) done = true;
        else if (body === 0) done = true;
        else {
          moov = [];
          moovLeft = body;
        }
      } else skip = body;
    }
  };

  const tap = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      if (!done) feed(chunk);
      cb(null, chunk);
    },
  });
  return { tap, seconds: () => seconds };
}

/** The movie duration in seconds from the children of a moov box. */
export function mvhdSeconds(moov: Buffer): number | undefined {
  let pos = 0;
  while (pos + 8 <= moov.length) {
    const size = moov.readUInt32BE(pos);
    const type = moov.toString('latin1', pos + 4, pos + 8);
    if (size < 8) return undefined;
    if (type === 'mvhd') {
      const b = moov.subarray(pos + 8, pos + size);
      const version = b[0];
      if (version === 1 && b.length >= 32) {
        const timescale = b.readUInt32BE(20);
        return timescale > 0 ? Number(b.readBigUInt64BE(24)) / timescale : undefined;
      }
      if (version === 0 && b.length >= 20) {
        const timescale = b.readUInt32BE(12);
        return timescale > 0 ? b.readUInt32BE(16) / timescale : undefined;
      }
      return undefined;
    }
    pos += size;
  }
  return undefined;
}
