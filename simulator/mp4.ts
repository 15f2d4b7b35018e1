/**
 * A small, real ISO-BMFF (MP4) writer for the simulator's videos: `ftyp`, `mdat` and `moov`
 * (movie header, one video track with its header, media header, handler, and an empty sample
 * table), the layout an encoder without "fast start" writes. The movie header's duration is
 * the duration the simulator reports, so a reader of the file learns the same number. The media
 * data is filler of any size, generated as it is sent: a 50 MB video is never in memory.
 */

export interface Mp4Spec {
  /** Duration in milliseconds (movie timescale 1000). */
  durationMs: number;
  width: number;
  height: number;
  /** Bytes of media data (mdat payload). */
  mediaBytes: number;
  /** Varies the filler bytes. */
  seed?: number;
}

const TIMESCALE = 1000;
const CHUNK = 64 * 1024;

function box(type: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, body]);
}

function fullBox(type: string, version: number, flags: number, ...payload: Buffer[]): Buffer {
  const vf = Buffer.alloc(4);
  vf.writeUInt32BE(((version & 0xff) << 24) | (flags & 0xffffff), 0);
  return box(type, vf, ...payload);
}

const u32 = (...values: number[]) => {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeUInt32BE(v >>> 0, 4 * i));
  return b;
};
const zeros = (n: number) => Buffer.alloc(n);
/** The identity matrix of mvhd/tkhd (16.16 and 2.30 fixed point). */
const MATRIX = u32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

function moov(s: Mp4Spec): Buffer {
  const duration = Math.max(0, Math.round(s.durationMs));
  const mvhd = fullBox('mvhd', 0, 0, u32(0, 0, TIMESCALE, duration), u32(0x00010000), Buffer.from([0x01, 0x00]), zeros(10), MATRIX, zeros(24), u32(2));
  const tkhd = fullBox('tkhd', 0, 3, u32(0, 0, 1, 0, duration), zeros(8), zeros(4), zeros(4), MATRIX, u32(s.width << 16, s.height << 16));
  const mdhd = fullBox('mdhd', 0, 0, u32(0, 0, TIMESCALE, duration), Buffer.from([0x55, 0xc4, 0x00, 0x00])); // language "und"
  const hdlr = fullBox('hdlr', 0, 0, u32(0), Buffer.from('vide', 'latin1'), zeros(12), Buffer.from('VideoHandler\0', 'latin1'));
  const vmhd = fullBox('vmhd', 0, 1, zeros(8));
  const dinf = box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1)));
  const stbl = box(
    'stbl',
    fullBox('stsd', 0, 0, u32(0)),
    fullBox('stts', 0, 0, u32(0)),
    fullBox('stsc', 0, 0, u32(0)),
    fullBox('stsz', 0, 0, u32(0, 0)),
    fullBox('stco', 0, 0, u32(0)),
  );
  const trak = box('trak', tkhd, box('mdia', mdhd, hdlr, box('minf', vmhd, dinf, stbl)));
  return box('moov', mvhd, trak);
}

/** The file as a size and a generator of its bytes, in chunks of at most 64 KiB. */
export function mp4File(s: Mp4Spec): { size: number; chunks(): Generator<Buffer> } {
  const ftyp = box('ftyp', Buffer.from('isom', 'latin1'), u32(0x200), Buffer.from('isomiso2mp41', 'latin1'));
  const tail = moov(s);
  const mdatHead = u32(8 + s.mediaBytes, 0);
  mdatHead.write('mdat', 4, 'latin1');
  const filler = Buffer.alloc(Math.min(CHUNK, Math.max(1, s.mediaBytes)));
  let x = (s.seed ?? 1) >>> 0 || 1;
  for (let i = 0; i < filler.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    filler[i] = x & 0xff;
  }
  return {
    size: ftyp.length + mdatHead.length + s.mediaBytes + tail.length,
    *chunks() {
      yield ftyp;
      yield mdatHead;
      for (let left = s.mediaBytes; left > 0; left -= filler.length) yield left >= filler.length ? filler : filler.subarray(0, left);
      yield tail;
    },
  };
}

/** The whole file in one buffer (small videos: files handed out by URL). */
export function mp4Buffer(s: Mp4Spec): Buffer {
  return Buffer.concat([...mp4File(s).chunks()]);
}
