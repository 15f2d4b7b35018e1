import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WorkQueue } from './queue.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('work queue', () => {
  it('a burst of adds of one key is handled once, after the debounce', async () => {
    const seen: string[] = [];
    const q = new WorkQueue(async (k) => void seen.push(k), { debounceMs: 50 });
    for (let i = 0; i < 100; i++) q.add('compile');
    q.add('status/Group/ns/a');
    await vi.advanceTimersByTimeAsync(49);
    expect(seen).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen.sort()).toEqual(['compile', 'status/Group/ns/a']);
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen).toHaveLength(2);
  });

  it('a key added while it runs runs exactly once more afterwards', async () => {
    let release!: () => void;
    const runs: number[] = [];
    const q = new WorkQueue(
      async () => {
        runs.push(Date.now());
        if (runs.length === 1) await new Promise<void>((r) => (release = r));
      },
      { debounceMs: 10 },
    );
    q.add('k');
    await vi.advanceTimersByTimeAsync(10);
    expect(runs).toHaveLength(1);
    q.add('k');
    q.add('k');
    q.add('k');
    release();
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toHaveLength(2);
    expect(q.length).toBe(0);
  });

  it('a failing key is retried with exponential backoff up to the cap, and a success resets it', async () => {
    const delays: number[] = [];
    let fail = true;
    let calls = 0;
    const q = new WorkQueue(
      async () => {
        calls++;
        if (fail) throw new Error('conflict');
      },
      { debounceMs: 0, baseBackoffMs: 10, maxBackoffMs: 80, onError: (_k, _e, wait) => delays.push(wait) },
    );
    q.add('k', 0);
    await vi.advanceTimersByTimeAsync(10 + 20 + 40 + 80 + 80);
    expect(delays).toEqual([10, 20, 40, 80, 80, 80]);
    expect(q.retries('k')).toBe(6);
    fail = false;
    await vi.advanceTimersByTimeAsync(80);
    expect(q.retries('k')).toBe(0);
    const after = calls;
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toBe(after); // no more retries once it succeeded
  });

  it('keys fail independently, idle() waits for timers and work, shutDown drops what is pending', async () => {
    const done: string[] = [];
    const q = new WorkQueue(
      async (k) => {
        if (k === 'bad') throw new Error('x');
        done.push(k);
      },
      { debounceMs: 5, baseBackoffMs: 1000 },
    );
    q.add('good');
    q.add('bad');
    let idle = false;
    void q.idle().then(() => (idle = true));
    await vi.advanceTimersByTimeAsync(5);
    expect(done).toEqual(['good']);
    expect(idle).toBe(false); // 'bad' waits for its retry
    q.shutDown();
    await vi.advanceTimersByTimeAsync(0);
    expect(idle).toBe(true);
    q.add('good');
    await vi.advanceTimersByTimeAsync(100);
    expect(done).toEqual(['good']);
  });
});
