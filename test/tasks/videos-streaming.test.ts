import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { accountState } from '../../proxy/billing/ledger.js';
import { storeCases } from '../support/stores.js';
import { C, useTasksStack } from './support.js';
import { AUDIO, P720, videoClient, videoResources } from './videos-support.js';

const MB = 1024 * 1024;

// A full collection before each sample, so the samples count live data, not garbage the
// collector has yet to free (streaming 50 MB through allocates 50 MB of short-lived chunks).
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Live data (the JS heap plus Buffers and ArrayBuffers) after a full collection, and the resident set. */
const held = () => {
  gc();
  const m = process.memoryUsage();
  return { data: m.heapUsed + m.arrayBuffers, rss: m.rss };
};

for (const sc of storeCases()) {
  describe(`a 50 MB video on ${sc.name}`, () => {
    const t = useTasksStack(sc, { resources: videoResources, credits: { acct: 10n * C } });

    it('is streamed from the upstream into storage and out to the client with bounded memory, and billed on its movie header', async () => {
      const c = videoClient(t.gw.url);
      const before = await accountState(t.store, 'acct');
      const base = held();
      let peak = base;
      // A collection takes a while: sample again 50 ms after each sample ends, so the transfer keeps going.
      let sampling = true;
      let gcMs = 0;
      let samples = 0;
      const sample = () => {
        if (!sampling) return;
        const t0 = performance.now();
        const now = held();
        gcMs += performance.now() - t0;
        samples++;
        peak = { data: Math.max(peak.data, now.data), rss: Math.max(peak.rss, now.rss) };
        setTimeout(sample, 50);
      };
      setTimeout(sample, 50);
      let done;
      try {
        const sub = await c.submit({ model: 'vid-replicate', prompt: 'placeholder' }); // warm the path (pools, code)
        await c.until(sub.json.id);
        const big = await c.submit({ model: 'vid-openai', prompt: 'a long take [sim:mb=50] [sim:short]', duration: 8 });
        expect(big.status).toBe(200);
        done = await c.until(big.json.id, 60_000);
      } finally {
        sampling = false;
      }
      expect(done.status).toBe('succeeded');
      const growth = { data: (peak.data - base.data) / MB, rss: (peak.rss - base.rss) / MB };
      console.log(
        `50 MB video, ${sc.name}: peak growth of live heap+buffers ${growth.data.toFixed(1)} MB, of RSS ${growth.rss.toFixed(1)} MB (${samples} samples, ${(gcMs / samples).toFixed(1)} ms each)`,
      );
      // Streamed, a few chunks are live at a time; a copy of the whole video would hold its 50 MB
      // (and its chunks) live at once, 50 MB at the very least. The bound leaves room for PGlite,
      // whose WebAssembly memory counts among ArrayBuffers and grows in steps (seen: up to 28 MB
      // on a loaded CI run, 0-11 MB otherwise). RSS is logged only: other work in the process
      // moves it by as much.
      expect(growth.data).toBeLessThan(40);

      const stored = await t.store.query<{ results: unknown }>('SELECT results FROM tasks WHERE id = $1', [done.id]);
      const results = (typeof stored.rows[0]!.results === 'string' ? JSON.parse(stored.rows[0]!.results) : stored.rows[0]!.results) as { bytes: number }[];
      expect(results[0]!.bytes).toBeGreaterThan(50 * MB);

      // Read it back as a client would, keeping only a count and the tail (where moov sits).
      const r = await fetch(done.data![0]!.url);
      expect(r.headers.get('content-type')).toBe('video/mp4');
      let count = 0;
      let tail = Buffer.alloc(0);
      for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
        count += chunk.length;
        tail = Buffer.concat([tail, Buffer.from(chunk)]).subarray(-4096);
      }
      expect(count).toBe(results[0]!.bytes);
      const mvhd = tail.indexOf('mvhd');
      expect(tail.readUInt32BE(mvhd + 20) / tail.readUInt32BE(mvhd + 16)).toBe(6); // duration / timescale
      // 8 s held at 720p with audio, 6 s charged.
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 6n * (P720 + AUDIO) - 5n * (P720 + AUDIO), held: before.held });
    }, 120_000);
  });
}
