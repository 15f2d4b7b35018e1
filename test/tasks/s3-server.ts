import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small S3-compatible server for tests: path-style PUT and GET of objects, every request
 * authenticated with AWS Signature V4 — header-signed (what the AWS SDK sends) or query-signed
 * (presigned URLs), with expiry. Its own implementation of the algorithm, so it checks the
 * gateway's presigning against an independent reading of the spec, and the SDK's signing checks
 * this server.
 */
export interface S3Object {
  body: Buffer;
  contentType: string;
}

export interface S3TestServer {
  url: string;
  objects: Map<string, S3Object>;
  /** Every request: method, path, how it was authenticated and whether that held. */
  log: { method: string; path: string; auth: 'header' | 'query' | 'none'; ok: boolean; contentLength?: string }[];
  close(): Promise<void>;
}

const enc = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const hmac = (k: Buffer | string, s: string) => createHmac('sha256', k).update(s).digest();

function canonicalQuery(raw: string, drop?: string): string {
  if (!raw) return '';
  return raw
    .split('&')
    .map((p) => {
      const i = p.indexOf('=');
      const k = decodeURIComponent(i === -1 ? p : p.slice(0, i));
      const v = i === -1 ? '' : decodeURIComponent(p.slice(i + 1).replace(/\+/g, ' '));
      return [k, v] as const;
    })
    .filter(([k]) => k !== drop)
    .map(([k, v]) => [enc(k), enc(v)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function signature(secret: string, credential: string, amzDate: string, canonical: string): string {
  const [, date, region, service] = credential.split('/');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date!), region!), service!), 'aws4_request');
  return createHmac('sha256', key).update(toSign).digest('hex');
}

const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

export async function startS3Server(opts: { bucket: string; accessKeyId: string; secretAccessKey: string }): Promise<S3TestServer> {
  const objects = new Map<string, S3Object>();
  const log: S3TestServer['log'] = [];

  const verify = (req: IncomingMessage, path: string, query: string, body: Buffer): { auth: 'header' | 'query' | 'none'; ok: boolean; why?: string } => {
    const header = req.headers.authorization;
    if (header) {
      const m = /^AWS4-HMAC-SHA256 Credential=([^,]+), ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(header);
      if (!m) return { auth: 'header', ok: false, why: 'malformed Authorization' };
      const [, credential, signed, sig] = m as unknown as [string, string, string, string];
      if (!credential.startsWith(`${opts.accessKeyId}/`)) return { auth: 'header', ok: false, why: 'unknown access key' };
      const names = signed.split(';');
      if (!names.includes('host')) return { auth: 'header', ok: false, why: 'host not signed' };
      const headers = names
        .map(
          (n) =>
            `${n}:${String(req.headers[n] ?? '')
              .trim()
              .replace(/\s+/g, ' ')}\n`,
        )
        .join('');
      const payload = String(req.headers['x-amz-content-sha256'] ?? '');
      if (payload !== 'UNSIGNED-PAYLOAD' && payload !== sha256(body)) return { auth: 'header', ok: false, why: 'payload hash' };
      const canonical = [req.method, path, canonicalQuery(query), headers, signed, payload].join('\n');
      const ok = same(signature(opts.secretAccessKey, credential, String(req.headers['x-amz-date']), canonical), sig);
      return { auth: 'header', ok, ...(ok ? {} : { why: 'signature' }) };
    }
    const q = new URLSearchParams(query);
    const sig = q.get('X-Amz-Signature');
    if (!sig) return { auth: 'none', ok: false, why: 'no signature' };
    const credential = q.get('X-Amz-Credential') ?? '';
    const amzDate = q.get('X-Amz-Date') ?? '';
    if (!credential.startsWith(`${opts.accessKeyId}/`) || q.get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256')
      return { auth: 'query', ok: false, why: 'credential' };
    const t = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
    if (!t) return { auth: 'query', ok: false, why: 'date' };
    const signedAt = Date.UTC(+t[1]!, +t[2]! - 1, +t[3]!, +t[4]!, +t[5]!, +t[6]!);
    if (signedAt + Number(q.get('X-Amz-Expires')) * 1000 < Date.now()) return { auth: 'query', ok: false, why: 'expired' };
    const signed = q.get('X-Amz-SignedHeaders') ?? '';
    const headers = signed
      .split(';')
      .map((n) => `${n}:${String(req.headers[n] ?? '').trim()}\n`)
      .join('');
    const canonical = [req.method === 'HEAD' ? 'GET' : req.method, path, canonicalQuery(query, 'X-Amz-Signature'), headers, signed, 'UNSIGNED-PAYLOAD'].join(
      '\n',
    );
    const ok = same(signature(opts.secretAccessKey, credential, amzDate, canonical), sig);
    return { auth: 'query', ok, ...(ok ? {} : { why: 'signature' }) };
  };

  const error = (res: ServerResponse, status: number, code: string, message: string) => {
    res.writeHead(status, { 'content-type': 'application/xml' });
    res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '/';
      const qi = url.indexOf('?');
      const path = qi === -1 ? url : url.slice(0, qi);
      const query = qi === -1 ? '' : url.slice(qi + 1);
      const body = Buffer.concat(chunks);
      const v = verify(req, path, query, body);
      log.push({
        method: req.method ?? '',
        path,
        auth: v.auth,
        ok: v.ok,
        ...(req.headers['content-length'] ? { contentLength: req.headers['content-length'] } : {}),
      });
      if (!v.ok) return error(res, 403, v.why === 'expired' ? 'AccessDenied' : 'SignatureDoesNotMatch', `request not authenticated: ${v.why}`);
      const prefix = `/${opts.bucket}/`;
      if (!path.startsWith(prefix)) return error(res, 404, 'NoSuchBucket', 'no such bucket');
      const key = decodeURIComponent(path.slice(prefix.length));
      if (req.method === 'PUT') {
        if (req.headers['content-length'] === undefined) return error(res, 411, 'MissingContentLength', 'Content-Length is required');
        objects.set(key, { body, contentType: String(req.headers['content-type'] ?? 'binary/octet-stream') });
        res.writeHead(200, { etag: `"${createHash('md5').update(body).digest('hex')}"` });
        return res.end();
      }
      if (req.method === 'GET' || req.method === 'HEAD') {
        const o = objects.get(key);
        if (!o) return error(res, 404, 'NoSuchKey', 'no such key');
        res.writeHead(200, { 'content-type': o.contentType, 'content-length': o.body.length });
        return res.end(req.method === 'HEAD' ? undefined : o.body);
      }
      if (req.method === 'DELETE') {
        objects.delete(key);
        res.writeHead(204);
        return res.end();
      }
      error(res, 405, 'MethodNotAllowed', 'method not allowed');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    objects,
    log,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
