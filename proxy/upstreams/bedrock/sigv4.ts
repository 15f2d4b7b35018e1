import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';

/**
 * AWS Signature Version 4 by the official signer (@smithy/signature-v4), with node:crypto as its
 * SHA-256 and HMAC (the signer takes any hash constructor; this is the one Node has built in).
 */
type SourceData = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: SourceData): Buffer =>
  typeof d === 'string' ? Buffer.from(d, 'utf8') : ArrayBuffer.isView(d) ? Buffer.from(d.buffer, d.byteOffset, d.byteLength) : Buffer.from(d);

class NodeSha256 {
  private h: Hash | Hmac;
  constructor(private readonly secret?: SourceData) {
    this.h = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(this.secret));
  }
  update(data: SourceData): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
  reset(): void {
    this.h = this.fresh();
  }
}

export interface AwsKeys {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/**
 * The headers a POST to `url` must carry, signed for `service` in `region`: the given ones plus
 * x-amz-date, x-amz-security-token (with a session) and authorization. `signingDate` is for the
 * verifier (the simulator), which signs again at the request's own date.
 */
export async function signedHeaders(
  url: URL,
  headers: Record<string, string>,
  body: Buffer,
  o: { region: string; service: string; keys: AwsKeys; signingDate?: Date },
): Promise<Record<string, string>> {
  // The signer (about 6 MB of memory) loads on the first signed call, not at start.
  const { SignatureV4 } = await import('@smithy/signature-v4');
  const signer = new SignatureV4({ service: o.service, region: o.region, credentials: o.keys, sha256: NodeSha256 });
  const signed = await signer.sign(
    {
      method: 'POST',
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: { ...headers, host: url.host },
      body,
    },
    o.signingDate ? { signingDate: o.signingDate } : {},
  );
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(signed.headers)) if (k !== 'host') out[k] = String(v);
  return out;
}
