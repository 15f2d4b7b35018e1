import { createWriteStream } from 'node:fs';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ResultTooLargeError } from './types.js';

/** Streams body into a file, counting bytes and stopping past maxBytes. */
export async function spoolToFile(body: Readable, path: string, maxBytes: number): Promise<number> {
  let bytes = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (bytes > maxBytes) cb(new ResultTooLargeError(maxBytes));
      else cb(null, chunk);
    },
  });
  await pipeline(body, limit, createWriteStream(path, { flags: 'wx' }));
  return bytes;
}
