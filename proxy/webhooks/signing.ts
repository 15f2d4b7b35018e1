import { createHmac, timingSafeEqual } from 'node:crypto';

/** `sha256=<hex HMAC-SHA256(secret, body)>`: the X-Service-Signature value for these exact bytes. */
export function signBody(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** What a receiver does: recompute over the raw bytes and compare in constant time. */
export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (!header) return false;
  const want = Buffer.from(signBody(secret, body));
  const got = Buffer.from(header);
  return got.length === want.length && timingSafeEqual(got, want);
}
