import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { ResponseBody } from './response.js';

/** undici's side of the body, recorded. */
function controller() {
  const calls: string[] = [];
  let paused = false;
  const c = {
    calls,
    get paused() {
      return paused;
    },
    get aborted() {
      return calls.includes('abort');
    },
    reason: null,
    pause: () => {
      paused = true;
      calls.push('pause');
    },
    resume: () => {
      paused = false;
      calls.push('resume');
    },
    abort: () => void calls.push('abort'),
  };
  return c as typeof c & Dispatcher.DispatchController;
}

describe('ResponseBody', () => {
  it('gives a burst that arrived together as one chunk (a stream relay writes it before reading on)', async () => {
    const body = new ResponseBody(controller());
    body.push(Buffer.from('data: 1\n\n'));
    body.push(Buffer.from('data: 2\n\n'));
    body.push(Buffer.from('data: [DONE]\n\n'));
    body.end();
    expect((await body.next())?.toString()).toBe('data: 1\n\ndata: 2\n\ndata: [DONE]\n\n');
    expect(await body.next()).toBeUndefined();
  });

  it('pauses the upstream past 64 KiB queued and resumes it once taken', async () => {
    const c = controller();
    const body = new ResponseBody(c);
    body.push(Buffer.alloc(40 * 1024));
    expect(c.paused).toBe(false);
    body.push(Buffer.alloc(40 * 1024));
    expect(c.paused).toBe(true);
    expect((await body.next())?.length).toBe(80 * 1024);
    expect(c.calls).toEqual(['pause', 'resume']);
  });

  it('gives what was queued before an error, then the error', async () => {
    const body = new ResponseBody(controller());
    body.push(Buffer.from('part'));
    body.fail(new Error('socket hang up'));
    expect((await body.next())?.toString()).toBe('part');
    await expect(body.next()).rejects.toThrow('socket hang up');
  });

  it('wakes a reader that waits, and ends it', async () => {
    const body = new ResponseBody(controller());
    const chunks: string[] = [];
    const reading = (async () => {
      for await (const chunk of body) chunks.push(chunk.toString());
    })();
    await new Promise((r) => setTimeout(r, 5));
    body.push(Buffer.from('a'));
    await new Promise((r) => setTimeout(r, 5));
    body.push(Buffer.from('b'));
    body.end();
    await reading;
    expect(chunks).toEqual(['a', 'b']);
  });

  it('aborts the call when its reader leaves early, and not once it has ended', async () => {
    const open = controller();
    const body = new ResponseBody(open);
    body.push(Buffer.from('a'));
    for await (const _ of body) break;
    expect(open.calls).toEqual(['abort']);

    const done = controller();
    const ended = new ResponseBody(done);
    ended.push(Buffer.from('a'));
    ended.end();
    for await (const _ of ended) break;
    expect(done.calls).toEqual([]);
  });
});
