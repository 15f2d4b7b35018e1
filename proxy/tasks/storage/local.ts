import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GatewayError } from '../../../kernel/errors.js';
import type { RequestContext, Route } from '../../http/context.js';
import { spoolToFile } from './spool.js';
import { contentTypeOf, KEY_RE, type ResultStorage } from './types.js';

export const RESULTS_PATH = '/v1/results';

/**
 * Results in a local folder, served by the gateway at /v1/results/<task>/<file>?expires=&signature=
 * where signature = hex HMAC-SHA256(signing key, "<task>/<file>\n<expires>"). The signature is
 * the credential: no API key is needed, and it stops working at `expires` (epoch seconds).
 */
export class LocalStorage implements ResultStorage {
  readonly kind = 'local' as const;

  constructor(
    private readonly root: string,
    private readonly publicBaseURL: () => string,
    private readonly signingKey: () => Promise<Buffer>,
  ) {}

  async put(key: string, body: Readable, _contentType: string, maxBytes: number): Promise<{ bytes: number }> {
    const final = this.pathOf(key);
    const tmpDir = join(this.root, '.tmp');
    await mkdir(tmpDir, { recursive: true });
    await mkdir(join(final, '..'), { recursive: true });
    const tmp = join(tmpDir, randomBytes(12).toString('hex'));
    try {
      const bytes = await spoolToFile(body, tmp, maxBytes);
      // A reader sees the whole file or none of it.
      await rename(tmp, final);
      return { bytes };
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  async url(key: string, expiresAt: Date): Promise<string> {
    const expires = Math.floor(expiresAt.getTime() / 1000);
    const sig = await this.sign(key, expires);
    return `${this.publicBaseURL()}${RESULTS_PATH}/${key}?expires=${expires}&signature=${sig}`;
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  /** GET (and HEAD) of a result file. */
  route(): Route {
    return {
      method: 'GET',
      path: `${RESULTS_PATH}/:task/:file`,
      name: `${RESULTS_PATH}/:task/:file`,
      shape: 'openai',
      auth: 'none',
      handler: (ctx) => this.serve(ctx),
    };
  }

  private async serve(ctx: RequestContext): Promise<void> {
    const key = `${ctx.params.task}/${ctx.params.file}`;
    const expires = Number(ctx.query.get('expires'));
    const given = ctx.query.get('signature') ?? '';
    if (!KEY_RE.test(key) || !Number.isInteger(expires) || !/^[0-9a-f]{64}$/.test(given)) {
      throw new GatewayError('not_found', 'no such result (a result URL carries expires and signature parameters)');
    }
    const want = Buffer.from(await this.sign(key, expires), 'hex');
    if (!timingSafeEqual(want, Buffer.from(given, 'hex'))) {
      throw new GatewayError('forbidden', 'the signature of this result URL is not valid');
    }
    const now = Math.floor(Date.now() / 1000);
    if (expires <= now) {
      throw new GatewayError('forbidden', 'this result URL has expired; GET the task again for a fresh one');
    }
    const path = this.pathOf(key);
    let size: number;
    try {
      size = (await stat(path)).size;
    } catch {
      throw new GatewayError('not_found', 'no such result');
    }
    const ext = key.slice(key.lastIndexOf('.') + 1);
    ctx.res.writeHead(200, {
      'content-type': contentTypeOf(ext),
      'content-length': size,
      'cache-control': `private, max-age=${expires - now}`,
    });
    if (ctx.method === 'HEAD') {
      ctx.res.end();
      return;
    }
    await pipeline(createReadStream(path), ctx.res).catch(() => ctx.res.destroy());
  }

  private async sign(key: string, expires: number): Promise<string> {
    return createHmac('sha256', await this.signingKey())
      .update(`${key}\n${expires}`)
      .digest('hex');
  }

  private pathOf(key: string): string {
    if (!KEY_RE.test(key)) throw new Error(`invalid result key ${JSON.stringify(key)}`);
    return join(this.root, key);
  }
}
