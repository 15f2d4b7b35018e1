import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { spoolToFile } from './spool.js';
import { presignGet, rfc3986 } from './sigv4.js';
import { KEY_RE, type ResultStorage } from './types.js';

export interface S3Settings {
  bucket: string;
  region?: string;
  endpoint?: string;
  prefix?: string;
  forcePathStyle?: boolean;
}

/**
 * Results in an S3-compatible bucket; URLs are SigV4-presigned GETs. Credentials come from the
 * AWS SDK's default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profile, web identity,
 * instance role). A result is first spooled to a temporary file so the upload has a length
 * (S3 needs one) without the result ever sitting in memory.
 */
export class S3Storage implements ResultStorage {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  private readonly region: string;

  constructor(private readonly cfg: S3Settings) {
    this.region = cfg.region ?? 'us-east-1';
    this.client = new S3Client({
      region: this.region,
      ...(cfg.endpoint ? { endpoint: cfg.endpoint } : {}),
      forcePathStyle: cfg.forcePathStyle ?? false,
      // Plain PUTs with Content-Length: what every S3-compatible server accepts.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async put(key: string, body: Readable, contentType: string, maxBytes: number): Promise<{ bytes: number }> {
    const tmp = join(tmpdir(), `tollgate-upload-${randomBytes(12).toString('hex')}`);
    try {
      const bytes = await spoolToFile(body, tmp, maxBytes);
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.cfg.bucket,
          Key: this.objectKey(key),
          Body: createReadStream(tmp),
          ContentLength: bytes,
          ContentType: contentType,
        }),
      );
      return { bytes };
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async url(key: string, expiresAt: Date): Promise<string> {
    const credentials = await this.client.config.credentials();
    const path = this.objectKey(key).split('/').map(rfc3986).join('/');
    let url: URL;
    if (this.cfg.endpoint) {
      const e = new URL(this.cfg.endpoint);
      const base = e.pathname.replace(/\/+$/, '');
      url = this.cfg.forcePathStyle
        ? new URL(`${e.origin}${base}/${this.cfg.bucket}/${path}`)
        : new URL(`${e.protocol}//${this.cfg.bucket}.${e.host}${base}/${path}`);
    } else {
      url =
        this.cfg.bucket.includes('.') || this.cfg.forcePathStyle
          ? new URL(`https://s3.${this.region}.amazonaws.com/${this.cfg.bucket}/${path}`)
          : new URL(`https://${this.cfg.bucket}.s3.${this.region}.amazonaws.com/${path}`);
    }
    return presignGet({ url, region: this.region, credentials, expiresSeconds: (expiresAt.getTime() - Date.now()) / 1000 });
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.cfg.bucket, Key: this.objectKey(key) }));
  }

  private objectKey(key: string): string {
    if (!KEY_RE.test(key)) throw new Error(`invalid result key ${JSON.stringify(key)}`);
    return `${this.cfg.prefix ?? ''}${key}`;
  }
}
