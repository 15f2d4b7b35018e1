import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { runCli } from '../support/cli.js';
import { storeCases } from '../support/stores.js';
import { C, client, KEY, OTHER_KEY, useTasksStack } from './support.js';
import { videoClient, videoResources } from './videos-support.js';

/**
 * Every task charge and refund is a usage record beside chat's: kind image or video, what was
 * charged (images, seconds), credits or refunded credits, and the task id; in the key's
 * GET /v1/usage, the admin usage API and `tollgate credits usage`.
 */

type Rec = Record<string, unknown>;

for (const sc of storeCases()) {
  describe(`task usage records on ${sc.name}`, () => {
    const t = useTasksStack(sc, { resources: videoResources, credits: { acct: 100n * C, 'other-acct': 10n * C } });
    let images: ReturnType<typeof client>;
    let videos: ReturnType<typeof videoClient>;
    beforeAll(() => {
      images = client(t.gw.url);
      videos = videoClient(t.gw.url);
    });

    const own = async (key: string, query = ''): Promise<Rec[]> => {
      const r = await fetch(`${t.gw.url}/v1/usage${query}`, { headers: { authorization: `Bearer ${key}` } });
      expect(r.status).toBe(200);
      return ((await r.json()) as { data: Rec[] }).data;
    };
    const admin = async (query: string): Promise<Rec[]> => {
      const r = await fetch(`${t.gw.adminUrl}/admin/v1/usage${query}`, { headers: { authorization: 'Bearer test-admin' } });
      expect(r.status).toBe(200);
      return ((await r.json()) as { data: Rec[] }).data;
    };

    it('a succeeded image task is a record of kind image: the images charged, their credits, the task id', async () => {
      const sub = await images.submit('/v1/images/generations', { model: 'img', prompt: 'two lamps', n: 2, size: '64x64' });
      expect((await images.until(sub.json.id)).status).toBe('succeeded');
      const rec = (await own(KEY)).find((r) => r.task_id === sub.json.id);
      expect(rec).toMatchObject({
        kind: 'image',
        task_id: sub.json.id,
        request_id: sub.json.id,
        model: 'img',
        key: 'k',
        account: 'acct',
        status: 'succeeded',
        images: 2,
        seconds: null,
        credits: '0.040000',
        refunded_credits: '0.000000',
      });
    });

    it('a succeeded video is charged for the seconds delivered, and its record says so', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await videos.submit({ model: 'vid-replicate', prompt: 'usage short [sim:short]', duration: 8 });
      expect((await videos.until(sub.json.id)).status).toBe('succeeded');
      const after = await accountState(t.store, 'acct');
      const rec = (await admin('?kind=video')).find((r) => r.task_id === sub.json.id);
      // 6 of 8 seconds at 720p with audio: 6 x 0.12.
      expect(rec).toMatchObject({
        kind: 'video',
        status: 'succeeded',
        seconds: 6,
        images: null,
        credits: '0.720000',
        refunded_credits: '0.000000',
        upstream_model: 'sim/veo',
      });
      expect(before.balance - after.balance).toBe(720_000n);
    });

    it('a failed and a cancelled task are records with no credits and the refunded hold', async () => {
      const failed = await images.submit('/v1/images/generations', { model: 'img', prompt: 'usage refused [sim:fail]', n: 3 });
      expect((await images.until(failed.json.id)).status).toBe('failed');
      const slow = await videos.submit({ model: 'vid-openai', prompt: 'usage cancelled [sim:slow=20000]', duration: 4 });
      expect((await videos.cancel(slow.json.id)).json.status).toBe('cancelled');
      const recs = await admin('?account=acct');
      expect(recs.find((r) => r.task_id === failed.json.id)).toMatchObject({
        kind: 'image',
        status: 'failed',
        images: 0,
        credits: '0.000000',
        refunded_credits: '0.060000',
      });
      expect(recs.find((r) => r.task_id === slow.json.id)).toMatchObject({
        kind: 'video',
        status: 'cancelled',
        seconds: 0,
        credits: '0.000000',
        refunded_credits: '0.480000',
      });
      // One record per task, however often it is read.
      const ids = recs.map((r) => r.task_id).filter(Boolean);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('filters by kind; another key does not see them; a bad kind is a 400', async () => {
      expect((await admin('?kind=image')).every((r) => r.kind === 'image')).toBe(true);
      expect(await admin('?kind=chat')).toEqual([]);
      expect((await own(OTHER_KEY)).filter((r) => r.kind !== 'chat')).toEqual([]);
      const bad = await fetch(`${t.gw.url}/v1/usage?kind=audio`, { headers: { authorization: `Bearer ${KEY}` } });
      expect(bad.status).toBe(400);
    });

    it('`tollgate credits usage --kind video` prints each video task with its seconds, credits, refund and task id', async () => {
      const r = await runCli(['credits', 'usage', '--kind', 'video', '--admin-url', t.gw.adminUrl, '--admin-token', 'test-admin']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const lines = r.stdout.trim().split('\n');
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(/ acct {2}k {2}vid-openai {2}cancelled {2}seconds=0 {2}credits=0\.000000 {2}refunded=0\.480000 {2}vid_[0-9a-f]+$/);
      expect(lines[1]).toMatch(/ acct {2}k {2}vid-replicate {2}succeeded {2}seconds=6 {2}credits=0\.720000 {2}refunded=0\.000000 {2}vid_[0-9a-f]+$/);
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}
