import { expect } from 'vitest';
import { apiKey, group } from '../support/resources.js';
import { client, imageRoute, KEY, OTHER_KEY, taskRoute, type TaskBody } from './support.js';

/** Manifests and a client for the video tests. */

export const POOR = 'sk-service-videos-poor';
/** A key of account acct with a spend limit of 0.5 credits. */
export const LIMITED = 'sk-service-videos-limited';
export const V = '/v1/videos/generations';

/** Per-second prices of these tests, in micro-credits: 720p 0.10, 1080p 0.20, audio 0.02. */
export const P720 = 100_000n;
export const P1080 = 200_000n;
export const AUDIO = 20_000n;

export function videoRoute(name: string, provider: 'openai' | 'replicate', baseURL: string, spec: Record<string, unknown> = {}) {
  return taskRoute(
    'video',
    name,
    provider,
    baseURL,
    {
      pricing: { perSecond: { '480p': '0.05', '720p': '0.10', '1080p': '0.20' }, audioPerSecond: '0.02' },
      capabilities: {
        firstFrame: true,
        lastFrame: true,
        referenceImages: true,
        referenceVideo: true,
        audio: true,
        resolutions: ['480p', '720p', '1080p'],
        minDuration: 4,
        maxDuration: 20,
      },
    },
    spec,
  );
}

export function videoResources(s: string): object[] {
  return [
    videoRoute('vid-openai', 'openai', `${s}/v1`, { model: 'video-sim' }),
    videoRoute('vid-sora', 'openai', `${s}/v1`, { model: 'sora-2' }),
    videoRoute('vid-replicate', 'replicate', `${s}/v1`, { model: 'sim/veo' }),
    videoRoute('vid-plain', 'openai', `${s}/v1`, { model: 'video-sim', capabilities: {}, pricing: { perSecond: { '720p': '0.10' }, audioPerSecond: '0.02' } }),
    imageRoute('img', 'openai', `${s}/v1`),
    group('g', ['vid-openai', 'vid-sora', 'vid-replicate', 'vid-plain', 'img']),
    apiKey('k', KEY, 'g', { account: 'acct' }),
    apiKey('other', OTHER_KEY, 'g', { account: 'other-acct' }),
    apiKey('poor', POOR, 'g', { account: 'poor' }),
    apiKey('limited', LIMITED, 'g', { account: 'acct', spendLimit: '0.5' }),
  ];
}

/** The video endpoints over the task client (the submission, query and cancel paths of videos). */
export function videoClient(base: string, key = KEY) {
  const c = client(base, key);
  return {
    ...c,
    submit: (body: unknown, headers?: Record<string, string>) => c.call('POST', V, body, headers),
    get: (id: string) => c.call('GET', `${V}/${id}`),
    cancel: (id: string) => c.call('POST', `${V}/${id}/cancel`),
    async until(id: string, ms = 20_000): Promise<TaskBody & { mode?: string }> {
      const end = performance.now() + ms;
      for (;;) {
        const r = await c.call('GET', `${V}/${id}`);
        if (r.status !== 200) throw new Error(`GET ${id}: ${r.status} ${JSON.stringify(r.json)}`);
        if (['succeeded', 'failed', 'cancelled'].includes(r.json.status)) return r.json;
        expect(r.json.status).toBe('processing');
        if (performance.now() > end) throw new Error(`task ${id} still ${r.json.status} after ${ms} ms`);
        await new Promise((res) => setTimeout(res, 20));
      }
    },
  };
}

/** Top-level ISO-BMFF boxes and the movie header's duration, read independently of the simulator's writer. */
export function mp4Boxes(b: Buffer): { types: string[]; seconds: number } {
  const types: string[] = [];
  let seconds = NaN;
  const walk = (from: number, to: number, depth: number) => {
    for (let pos = from; pos < to;) {
      const size = b.readUInt32BE(pos);
      const type = b.toString('latin1', pos + 4, pos + 8);
      expect(size).toBeGreaterThanOrEqual(8);
      if (depth === 0) types.push(type);
      if (type === 'moov') walk(pos + 8, pos + size, depth + 1);
      if (type === 'mvhd') {
        expect(b[pos + 8]).toBe(0); // version 0: 32-bit times
        seconds = b.readUInt32BE(pos + 24) / b.readUInt32BE(pos + 20);
      }
      pos += size;
    }
  };
  walk(0, b.length, 0);
  return { types, seconds };
}
