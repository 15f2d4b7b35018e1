import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Queryable } from '../../store/index.js';
import { LocalStorage } from './local.js';
import { S3Storage, type S3Settings } from './s3.js';

export { LocalStorage, RESULTS_PATH } from './local.js';
export { S3Storage, type S3Settings } from './s3.js';
export { contentTypeOf, extensionOf, KEY_RE, ResultTooLargeError, sniff, type ResultStorage } from './types.js';

/**
 * The key result URLs are signed with: kept in the database's meta table, so every replica
 * sharing the database signs and verifies alike, and URLs survive a restart.
 */
export async function sharedSigningKey(q: Queryable): Promise<Buffer> {
  await q.query("INSERT INTO meta (key, value) VALUES ('result_url_signing_key', $1) ON CONFLICT (key) DO NOTHING", [randomBytes(32).toString('hex')]);
  const r = await q.query<{ value: string }>("SELECT value FROM meta WHERE key = 'result_url_signing_key'");
  return Buffer.from(r.rows[0]!.value, 'hex');
}

/** S3 when configured, else a local folder: <data dir>/results, or a temporary folder. */
export async function openStorage(opts: {
  s3?: S3Settings;
  dataDir?: string;
  publicBaseURL: () => string;
  signingKey: () => Promise<Buffer>;
}): Promise<S3Storage | LocalStorage> {
  if (opts.s3) return new S3Storage(opts.s3);
  let root: string;
  if (opts.dataDir) {
    root = join(opts.dataDir, 'results');
    await mkdir(root, { recursive: true });
  } else root = await mkdtemp(join(tmpdir(), 'tollgate-results-'));
  return new LocalStorage(root, opts.publicBaseURL, opts.signingKey);
}
