import { createHash, createHmac } from 'node:crypto';

/**
 * AWS Signature Version 4 query signing (a presigned GET), per
 * https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html — enough for
 * S3-compatible result URLs without another dependency.
 */
export interface SigV4Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** RFC 3986 encoding as SigV4 wants it (encodeURIComponent leaves !'()* alone). */
export function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const hmac = (key: Buffer | string, s: string) => createHmac('sha256', key).update(s).digest();

export function signingKey(secret: string, date: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
}

/** `url` is the object URL with its path already encoded and no query. */
export function presignGet(opts: { url: URL; region: string; credentials: SigV4Credentials; expiresSeconds: number; now?: Date; service?: string }): string {
  const service = opts.service ?? 's3';
  const now = opts.now ?? new Date();
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const date = amzDate.slice(0, 8);
  const scope = `${date}/${opts.region}/${service}/aws4_request`;
  const params: [string, string][] = [
    ['X-Amz-Algorithm', 'AWS4-HMAC-SHA256'],
    ['X-Amz-Credential', `${opts.credentials.accessKeyId}/${scope}`],
    ['X-Amz-Date', amzDate],
    ['X-Amz-Expires', String(Math.max(1, Math.min(604800, Math.floor(opts.expiresSeconds))))],
    ['X-Amz-SignedHeaders', 'host'],
  ];
  if (opts.credentials.sessionToken) params.push(['X-Amz-Security-Token', opts.credentials.sessionToken]);
  const query = params
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const canonical = ['GET', opts.url.pathname, query, `host:${opts.url.host}\n`, 'host', 'UNSIGNED-PAYLOAD'].join('\n');
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  const signature = createHmac('sha256', signingKey(opts.credentials.secretAccessKey, date, opts.region, service))
    .update(toSign)
    .digest('hex');
  return `${opts.url.origin}${opts.url.pathname}?${query}&X-Amz-Signature=${signature}`;
}
