import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { LocalMedia } from '../task-provider.js';

export type Part = { name: string; value: string } | { name: string; file: LocalMedia };

/**
 * multipart/form-data streamed from files on disk: the exact length is known up front (files
 * are already downloaded), so the upload has a Content-Length and never sits whole in memory.
 * stream() may be called again for a retry.
 */
export function multipartBody(parts: Part[]): { contentType: string; length: number; stream(): Readable } {
  const boundary = `----tollgate${randomBytes(12).toString('hex')}`;
  const heads = parts.map((p) => {
    const name = quote(p.name);
    if ('value' in p) return Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${p.value}\r\n`);
    return Buffer.from(
      `--${boundary}\r\ncontent-disposition: form-data; name="${name}"; filename="${quote(p.file.filename)}"\r\ncontent-type: ${p.file.contentType}\r\n\r\n`,
    );
  });
  const tail = Buffer.from(`--${boundary}--\r\n`);
  let length = tail.length;
  parts.forEach((p, i) => (length += heads[i]!.length + ('file' in p ? p.file.size + 2 : 0)));
  async function* gen() {
    for (let i = 0; i < parts.length; i++) {
      yield heads[i]!;
      const p = parts[i]!;
      if ('file' in p) {
        for await (const chunk of createReadStream(p.file.path)) yield chunk as Buffer;
        yield Buffer.from('\r\n');
      }
    }
    yield tail;
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, length, stream: () => Readable.from(gen()) };
}

const quote = (s: string) => s.replace(/["\r\n]/g, '_');
