import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { mp4Boxes } from './videos-support.js';

/** The simulator's videos API as the official SDK sees it (multipart creation, polling, content download). */
describe('the simulator speaks OpenAI videos to the official SDK', () => {
  let sim: Simulator;
  let openai: OpenAI;

  beforeAll(async () => {
    sim = await startSimulator();
    openai = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'sk-sim', maxRetries: 0 });
  });
  afterAll(async () => {
    await sim?.close();
  });

  async function finished(id: string) {
    for (;;) {
      const v = await openai.videos.retrieve(id);
      if (v.status === 'completed' || v.status === 'failed') return v;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('creates, polls and downloads a real MP4 of the reported duration', async () => {
    const created = await openai.videos.create({ model: 'sora-2', prompt: 'a paper boat [sim:short]', seconds: '8', size: '1280x720' });
    expect(created).toMatchObject({ object: 'video', model: 'sora-2', status: 'queued', seconds: '8', size: '1280x720' });
    expect(sim.recorder.last('/v1/videos')!.headers['content-type']).toMatch(/^multipart\/form-data/);
    const done = await finished(created.id);
    expect(done).toMatchObject({ status: 'completed', progress: 100, seconds: '6', error: null });
    const content = await openai.videos.downloadContent(created.id);
    expect(content.headers.get('content-type')).toBe('video/mp4');
    expect(mp4Boxes(Buffer.from(await content.arrayBuffer()))).toEqual({ types: ['ftyp', 'mdat', 'moov'], seconds: 6 });
  });

  it('refuses blocked content at creation and fails a [sim:fail] job with its error', async () => {
    const blocked = await openai.videos.create({ model: 'sora-2', prompt: 'forbidden [sim:blocked]' }).catch((e: unknown) => e);
    expect(blocked).toBeInstanceOf(OpenAI.BadRequestError);
    expect(blocked).toMatchObject({ status: 400, code: 'moderation_blocked' });
    const bad = await openai.videos.create({ model: 'sora-2', prompt: 'odd', seconds: '5' as '4' }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400, param: 'seconds' });
    const failing = await openai.videos.create({ model: 'sora-2', prompt: 'doomed [sim:fail]' });
    expect(await finished(failing.id)).toMatchObject({ status: 'failed', error: { code: 'video_generation_failed' } });
  });
});
