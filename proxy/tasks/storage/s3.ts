import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
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
 * (S3 needs one) without the result ever sitting in memory. The AWS SDK (about 10 MiB once
 * imported) is loaded on the first upload or URL, so a gateway without S3 never loads it.
 */
export class S3Storage implements ResultStorage {
  readonly kind = 's3' as const;
  private readonly region: string;
  private sdk: Promise<{ mod: typeof import('@aws-sdk/client-s3'); client: S3Client }> | undefined;

  constructor(private readonly cfg: S3Settings) {
    this.region = cfg.region ?? 'us-east-1';
  }

  private open() {
    return (this.sdk ??= import('@aws-sdk/client-s3').then((mod) => ({
      mod,
      client: new mod.S3Client({
        region: this.region,
        ...(this.cfg.endpoint ? { endpoint: this.cfg.endpoint } : {}),
        forcePathStyle: this.cfg.forcePathStyle ?? false,
        // Plain PUTs with Content-Length: what every S3-compatible server accepts.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      }),
    })));
  }

  async put(key: string, body: Readable, contentType: string, maxBytes: number): Promise<{ bytes: number }> {
    const tmp = join(tmpdir(), `tollgate-upload-${randomBytes(12).toString('hex')}`);
    try {
      const bytes = await spoolToFile(body, tmp, maxBytes);
      const { mod, client } = await this.open();
      await client.send(
        new mod.PutObjectCommand({
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
    const credentials = await (await this.open()).client.config.credentials();
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
    const { mod, client } = await this.open();
    await client.send(new mod.DeleteObjectCommand({ Bucket: this.cfg.bucket, Key: this.objectKey(key) }));
  }

  private objectKey(key: string): string {
    if (!KEY_RE.test(key)) throw new Error(`invalid result key ${JSON.stringify(key)}`);
    return `${this.cfg.prefix ?? ''}${key}`;
  }
}
