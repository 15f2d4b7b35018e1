import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayStream, type RelayResult } from '../../proxy/chat/relay.js';
import { PROTOCOLS } from '../../proxy/protocols/index.js';
import type { StreamTap } from '../../proxy/protocols/types.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';

/**
 * The relay reads a stream's events (usage, text) after it has sent them, in a tick of their own:
 * what the tap reads must still be complete when the relay returns, and a tap that throws there
 * must fail the stream as an upstream read error would, not take the process down.
 */
let sim: Simulator;
let front: Server;
let url: string;
let makeTap: () => StreamTap;
/** The relay's result, and what its tap had read when it returned (the caller settles on that at once). */
let last: Promise<{ result: RelayResult; read: Pick<StreamTap, 'usage' | 'final' | 'terminal' | 'textBytes'> }> | undefined;

beforeAll(async () => {
  sim = await startSimulator();
  front = createServer((req, res) => {
    last = (async () => {
      const up = await request(`${sim.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-sim', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] }),
      });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const tap = makeTap();
      const result = await relayStream({ res, body: up.body, tap, clientSignal: new AbortController().signal, drain: false });
      const read = { usage: tap.usage, final: tap.final, terminal: tap.terminal, textBytes: tap.textBytes };
      res.end(Buffer.concat(result.held));
      return { result, read };
    })();
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => front.close(r));
  await sim.close();
});

describe('relayStream', () => {
  it('holds back the terminal event and has read every event before it returns', async () => {
    makeTap = () => PROTOCOLS['chat-completions'].createTap();
    const text = await (await request(url)).body.text();
    const { result, read } = await last!;
    expect(Buffer.concat(result.held).toString()).toBe('data: [DONE]\n\n');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(read.terminal).toBe(true);
    expect(read.final).toBe(true);
    expect(read.usage?.outputTokens).toBeGreaterThan(0);
    expect(read.textBytes).toBeGreaterThan(0);
  });

  it('fails the stream, not the process, when the tap throws while reading sent events', async () => {
    makeTap = () => {
      const tap = PROTOCOLS['chat-completions'].createTap();
      return Object.assign(tap, {
        event: () => {
          throw new Error('tap broke');
        },
      });
    };
    const uncaught: Error[] = [];
    const onUncaught = (err: Error) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      await (await request(url)).body.text();
      const { result } = await last!;
      expect((result.error as Error | undefined)?.message).toBe('tap broke');
      expect(result.ended).toBe(false);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
