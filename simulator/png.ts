import { crc32, deflateSync } from 'node:zlib';

/** Largest picture the simulator draws (4096 x 4096): a 4K image, about 50 MB before compression. */
export const MAX_PIXELS = 4096 * 4096;

/**
 * A real PNG (8-bit RGB, no interlace) of exactly width x height: a gradient tinted by `seed`, so
 * different prompts give different pictures and tests can read the size back from IHDR.
 */
export function encodePng(width: number, height: number, seed = 0): Buffer {
  if (width * height > MAX_PIXELS) throw new RangeError(`at most ${MAX_PIXELS} pixels`);
  const tint = [(seed >>> 16) & 0xff, (seed >>> 8) & 0xff, seed & 0xff] as const;
  const stride = 1 + width * 3;
  const raw = Buffer.alloc(stride * height);
  const row = Buffer.alloc(width * 3);
  for (let x = 0; x < width; x++) {
    row[x * 3] = ((x * 255) / width) ^ tint[0];
    row[x * 3 + 2] = tint[2];
  }
  for (let y = 0; y < height; y++) {
    const g = ((y * 255) / height) ^ tint[1];
    for (let x = 0; x < width; x++) row[x * 3 + 1] = g;
    raw[y * stride] = 0; // filter: none
    row.copy(raw, y * stride + 1);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 1 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(data, crc32(head.subarray(4))) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** Width and height from a PNG's IHDR, or undefined when the bytes are not a PNG. */
export function pngSize(b: Buffer): { width: number; height: number } | undefined {
  if (b.length < 24 || b.readUInt32BE(0) !== 0x89504e47 || b.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

/** A stable number from a string, to tint pictures by prompt. */
export function seedOf(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}
