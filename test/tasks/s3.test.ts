import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../proxy/front/gateway.js';
import type { Store } from '../../proxy/store/index.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { disposeStore, storeCases } from '../support/stores.js';
import { startS3Server, type S3TestServer } from './s3-server.js';
import { C, client, grant, startTasksGateway } from './support.js';

const CREDS = { accessKeyId: 'AKIDTOLLGATETEST', secretAccessKey: 'test/secret+key=' };

describe('results in an S3-compatible bucket', () => {
  let s3: S3TestServer;
  let store: Store;
  let sim: Simulator;
  let gw: Gateway;

  beforeAll(async () => {
    // The AWS SDK's default credential chain reads these (this test file runs in its own process).
    process.env.AWS_ACCESS_KEY_ID = CREDS.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = CREDS.secretAccessKey;
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    s3 = await startS3Server({ bucket: 'results', ...CREDS });
    // Storage is what is tested here, not the store: the quickest one will do.
    store = await storeCases().at(-1)!.open();
    sim = await startSimulator();
    gw = await startTasksGateway({
      store,
      sim,
      options: { s3: { bucket: 'results', endpoint: s3.url, region: 'eu-west-1', prefix: 'tollgate/', forcePathStyle: true } },
    });
    await grant(store, 'acct', 10n * C);
  });
  afterAll(async () => {
    await gw?.close();
    await sim?.close();
    await s3?.close();
    if (store) await disposeStore(store);
  });

  it('uploads each result with a signed PUT and answers presigned URLs that fetch it without a key', async () => {
    const c = client(gw.url);
    const done = await c.until((await c.submit('/v1/images/generations', { model: 'img-openai', prompt: 'to the bucket', n: 2, size: '128x96' })).json.id);
    expect(done.status).toBe('succeeded');
    expect(s3.log.filter((l) => l.method === 'PUT')).toEqual([
      { method: 'PUT', path: `/results/tollgate/${done.id}/0.png`, auth: 'header', ok: true, contentLength: expect.stringMatching(/^\d+$/) },
      { method: 'PUT', path: `/results/tollgate/${done.id}/1.png`, auth: 'header', ok: true, contentLength: expect.stringMatching(/^\d+$/) },
    ]);
    for (const [i, { url }] of done.data!.entries()) {
      expect(url.startsWith(`${s3.url}/results/tollgate/${done.id}/${i}.png?`)).toBe(true);
      const r = await fetch(url);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('image/png');
      const bytes = Buffer.from(await r.arrayBuffer());
      expect(bytes.equals(s3.objects.get(`tollgate/${done.id}/${i}.png`)!.body)).toBe(true);
      expect(bytes.readUInt32BE(16)).toBe(128);
    }
    expect(s3.log.filter((l) => l.method === 'GET').every((l) => l.auth === 'query' && l.ok)).toBe(true);
    // The presigned URL is the credential: change anything it covers and it stops working.
    const url = done.data![0]!.url;
    expect((await fetch(url.replace('/0.png?', '/1.png?'))).status).toBe(403);
    expect((await fetch(url.replace(/X-Amz-Expires=\d+/, 'X-Amz-Expires=604800'))).status).toBe(403);
  });
});
