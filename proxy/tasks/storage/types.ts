import type { Readable } from 'node:stream';

/**
 * Where results are copied out of the upstream (whose URLs expire): a local folder served by the
 * gateway under signed URLs, or an S3-compatible bucket with presigned URLs. Bodies are streamed:
 * nothing here holds a whole result in memory.
 */
export interface ResultStorage {
  readonly kind: 'local' | 's3';
  /** Streams body into the object `key` ("<task id>/<n>.<ext>"); fails past maxBytes. */
  put(key: string, body: Readable, contentType: string, maxBytes: number): Promise<{ bytes: number }>;
  /** A URL anyone holding it may GET until expiresAt; no API key needed. */
  url(key: string, expiresAt: Date): Promise<string>;
  delete(key: string): Promise<void>;
}

export class ResultTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the result is larger than ${maxBytes} bytes`);
    this.name = 'ResultTooLargeError';
  }
}

/** Result keys are made by the engine: "<task id>/<index>.<ext>", nothing else. */
export const KEY_RE = /^[A-Za-z0-9_-]{1,64}\/[0-9]{1,3}\.[a-z0-9]{1,5}$/;

const TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  mp4: 'video/mp4',
  webm: 'video/webm',
  mov: 'video/quicktime',
  bin: 'application/octet-stream',
};

export function contentTypeOf(ext: string): string {
  return TYPES[ext] ?? 'application/octet-stream';
}

export function extensionOf(contentType: string | undefined, fallback: string): string {
  const t = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  for (const [ext, type] of Object.entries(TYPES)) if (type === t && ext !== 'bin') return ext;
  return fallback;
}

/** Magic numbers of the formats results come in, for bytes that arrive without a type. */
export function sniff(head: Buffer): string | undefined {
  if (head.length >= 8 && head.readUInt32BE(0) === 0x89504e47) return 'image/png';
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (head.length >= 12 && head.toString('latin1', 0, 4) === 'RIFF' && head.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  if (head.length >= 12 && head.toString('latin1', 4, 8) === 'ftyp') return 'video/mp4';
  return undefined;
}
