import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { mp4DurationProbe } from '../../proxy/tasks/videos/mp4-probe.js';
import { mp4Buffer, mp4File } from '../../simulator/mp4.js';
import { mp4Boxes } from './videos-support.js';

/** Every box of the file, nested, as "path:size", read with no help from the writer. */
function tree(b: Buffer, from = 0, to = b.length, prefix = ''): string[] {
  const out: string[] = [];
  const containers = new Set(['moov', 'trak', 'mdia', 'minf', 'dinf', 'stbl']);
  for (let pos = from; pos < to;) {
    const size = b.readUInt32BE(pos);
    const type = b.toString('latin1', pos + 4, pos + 8);
    expect(pos + size).toBeLessThanOrEqual(to);
    out.push(`${prefix}${type}`);
    if (containers.has(type)) out.push(...tree(b, pos + 8, pos + size, `${prefix}${type}/`));
    pos += size;
  }
  return out;
}

async function probe(chunks: Buffer[]): Promise<{ seconds: number | undefined; bytes: number }> {
  const p = mp4DurationProbe();
  let bytes = 0;
  for await (const c of Readable.from(chunks).pipe(p.tap)) bytes += (c as Buffer).length;
  return { seconds: p.seconds(), bytes };
}

describe('the simulator MP4 writer', () => {
  it('writes a well-formed ISO-BMFF file whose movie header carries the duration', () => {
    const b = mp4Buffer({ durationMs: 6500, width: 1280, height: 720, mediaBytes: 1000 });
    expect(tree(b)).toEqual([
      'ftyp',
      'mdat',
      'moov',
      'moov/mvhd',
      'moov/trak',
      'moov/trak/tkhd',
      'moov/trak/mdia',
      'moov/trak/mdia/mdhd',
      'moov/trak/mdia/hdlr',
      'moov/trak/mdia/minf',
      'moov/trak/mdia/minf/vmhd',
      'moov/trak/mdia/minf/dinf',
      'moov/trak/mdia/minf/dinf/dref',
      'moov/trak/mdia/minf/stbl',
      'moov/trak/mdia/minf/stbl/stsd',
      'moov/trak/mdia/minf/stbl/stts',
      'moov/trak/mdia/minf/stbl/stsc',
      'moov/trak/mdia/minf/stbl/stsz',
      'moov/trak/mdia/minf/stbl/stco',
    ]);
    expect(b.toString('latin1', 8, 12)).toBe('isom'); // major brand
    expect(mp4Boxes(b)).toEqual({ types: ['ftyp', 'mdat', 'moov'], seconds: 6.5 });
    const tkhd = b.indexOf('tkhd');
    expect([b.readUInt32BE(tkhd + 4 + 76) >>> 16, b.readUInt32BE(tkhd + 4 + 80) >>> 16]).toEqual([1280, 720]);
    const mdat = b.indexOf('mdat');
    expect(b.readUInt32BE(mdat - 4)).toBe(1008);
  });

  it('states its size up front and generates large files in bounded chunks', () => {
    const f = mp4File({ durationMs: 4000, width: 64, height: 64, mediaBytes: 5 * 1024 * 1024 + 3 });
    let total = 0;
    let largest = 0;
    for (const c of f.chunks()) {
      total += c.length;
      largest = Math.max(largest, c.length);
    }
    expect(total).toBe(f.size);
    expect(largest).toBeLessThanOrEqual(64 * 1024);
  });
});

describe('the gateway MP4 duration probe', () => {
  const file = mp4Buffer({ durationMs: 3750, width: 64, height: 64, mediaBytes: 300_000 });

  it('reads the duration from a stream in any chunking, passing every byte through', async () => {
    for (const size of [1, 7, 4096, file.length]) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < file.length; i += size) chunks.push(file.subarray(i, i + size));
      expect(await probe(chunks), `chunks of ${size}`).toEqual({ seconds: 3.75, bytes: file.length });
    }
  });

  it('finds moov before mdat too (fast start), and says nothing for what is not an MP4', async () => {
    const ftyp = file.subarray(0, file.readUInt32BE(0));
    const mdatAt = ftyp.length;
    const mdat = file.subarray(mdatAt, mdatAt + file.readUInt32BE(mdatAt));
    const moov = file.subarray(mdatAt + mdat.length);
    expect((await probe([Buffer.concat([ftyp, moov, mdat])])).seconds).toBe(3.75);
    expect((await probe([Buffer.from('\x89PNG\r\n\x1a\n and so on', 'latin1')])).seconds).toBeUndefined();
    expect((await probe([file.subarray(0, file.length - 10)])).seconds).toBeUndefined(); // cut short
  });
});
