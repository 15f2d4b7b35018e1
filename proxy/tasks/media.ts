import { randomBytes } from 'node:crypto';
import { open, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Agent } from 'undici';
import { USER_AGENT } from '../upstreams/headers.js';
import { assertUrlAllowed, guardedLookup, refusedCause, type UrlPolicy } from '../net/url-guard.js';
import { ProviderError, type LocalMedia } from '../upstreams/task-provider.js';
import { spoolToFile } from './storage/spool.js';
import { extensionOf, ResultTooLargeError, sniff } from './storage/types.js';

const MEDIA_TIMEOUT_MS = 60_000;
/** Redirects a download follows (a short link, a moved image, a storage host). */
const MAX_REDIRECTS = 5;

/**
 * Downloads of media URLs a client gave (edit inputs, masks) into temporary files, through the
 * URL guard: the address connected to is checked after DNS resolution, on every redirect
 * followed. A refused, missing or oversized input fails the task (not retryable); a host that is
 * down or answers 5xx is retried.
 */
export class MediaFetcher {
  private readonly agent: Agent;
  private readonly dir: string;

  constructor(
    private readonly policy: UrlPolicy,
    private readonly maxBytes: number,
  ) {
    this.agent = new Agent({ connect: { lookup: guardedLookup(policy), timeout: 10_000 } });
    this.dir = join(tmpdir(), `tollgate-media-${process.pid}-${randomBytes(4).toString('hex')}`);
  }

  async fetch(raw: string, field: string, signal: AbortSignal): Promise<LocalMedia> {
    const fail = (retryable: boolean, what: string) => new ProviderError(retryable, retryable ? 'media_unavailable' : 'invalid_media', `${field}: ${what}`);
    let url: URL;
    let resp;
    let next = raw;
    for (let hop = 0; ; hop++) {
      try {
        // Each hop is checked as the first was: a public URL may not redirect to a private one.
        url = assertUrlAllowed(next, this.policy);
      } catch (err) {
        throw fail(false, `${(err as Error).message}${hop ? ` (after ${hop} redirect${hop > 1 ? 's' : ''})` : ''}`);
      }
      try {
        resp = await this.agent.request({
          origin: url.origin,
          path: `${url.pathname}${url.search}`,
          method: 'GET',
          headers: { 'user-agent': USER_AGENT },
          signal,
          headersTimeout: MEDIA_TIMEOUT_MS,
          bodyTimeout: MEDIA_TIMEOUT_MS,
        });
      } catch (err) {
        if (signal.aborted) throw err;
        const refused = refusedCause(err);
        if (refused) throw fail(false, refused.message);
        throw fail(true, `could not be downloaded: ${(err as Error).message}`);
      }
      if (resp.statusCode < 300 || resp.statusCode >= 400 || resp.headers.location === undefined) break;
      await resp.body.dump().catch(() => {});
      if (hop === MAX_REDIRECTS) throw fail(false, `redirected more than ${MAX_REDIRECTS} times`);
      next = redirectTarget(resp.headers.location, url);
    }
    if (resp.statusCode !== 200) {
      await resp.body.dump().catch(() => {});
      throw fail(resp.statusCode === 429 || resp.statusCode >= 500, `downloading it answered HTTP ${resp.statusCode}`);
    }
    const declared = Number(resp.headers['content-length'] ?? 0);
    if (declared > this.maxBytes) {
      await resp.body.dump().catch(() => {});
      throw fail(false, `is ${declared} bytes, more than the ${this.maxBytes} allowed`);
    }
    await mkdir(this.dir, { recursive: true });
    const path = join(this.dir, randomBytes(12).toString('hex'));
    let size: number;
    try {
      size = await spoolToFile(resp.body, path, this.maxBytes);
    } catch (err) {
      await rm(path, { force: true });
      if (signal.aborted) throw err;
      if (err instanceof ResultTooLargeError) throw fail(false, `is larger than the ${this.maxBytes} bytes allowed`);
      throw fail(true, `download failed: ${(err as Error).message}`);
    }
    const declaredType = String(resp.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim();
    const contentType = declaredType && declaredType !== 'application/octet-stream' ? declaredType : ((await head(path)) ?? 'application/octet-stream');
    const name = basename(url.pathname);
    const filename = /\.[A-Za-z0-9]{1,5}$/.test(name) ? name : `${field.replace(/\W+/g, '_')}.${extensionOf(contentType, 'bin')}`;
    return { path, size, contentType, filename };
  }

  async discard(files: LocalMedia[]): Promise<void> {
    await Promise.all(files.map((f) => rm(f.path, { force: true })));
  }

  async close(): Promise<void> {
    await this.agent.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** A Location, resolved against the URL that answered it; one that is no URL is left as it is, for the guard to refuse. */
function redirectTarget(location: string | string[], from: URL): string {
  const l = Array.isArray(location) ? (location[0] ?? '') : location;
  try {
    return new URL(l, from).href;
  } catch {
    return l;
  }
}

async function head(path: string): Promise<string | undefined> {
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(16);
    const { bytesRead } = await fh.read(buf, 0, 16, 0);
    return sniff(buf.subarray(0, bytesRead));
  } finally {
    await fh.close();
  }
}
