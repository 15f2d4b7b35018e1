import { describe, expect, it } from 'vitest';
import { compile } from '../api/snapshot/index.js';
import { StaticConfigSource } from '../proxy/config/folder-source.js';
import { startGateway } from '../proxy/front/gateway.js';
import { createLogger } from '../kernel/log.js';
import { apiKey, chatRoute, group } from './support/resources.js';

describe('graceful shutdown', () => {
  it('lets a request in flight finish, refuses new connections, and reports not ready', async () => {
    const source = new StaticConfigSource(
      compile([chatRoute('m', 'http://127.0.0.1:1/v1'), group('g', ['m']), apiKey('k', 'sk-service-s', 'g')].map((object) => ({ object }))).config,
    );
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const gw = await startGateway({
      source,
      port: 0,
      adminPort: 0,
      log: createLogger({}, 'silent'),
      billing: () => ({ holdChat: () => Promise.reject(new Error('not used')), close: async () => {} }),
      features: [
        () => ({
          routes: [
            {
              method: 'GET',
              path: '/slow',
              shape: 'openai',
              auth: 'none',
              handler: async (ctx) => {
                entered();
                await new Promise((r) => setTimeout(r, 300));
                ctx.res.end('finished');
              },
            },
          ],
        }),
      ],
    });
    const slow = fetch(`${gw.url}/slow`).then((r) => r.text());
    await inside;
    const closing = gw.close();
    expect(gw.ready()).toBe(false);
    await expect(fetch(`${gw.url}/slow`)).rejects.toThrow();
    expect(await slow).toBe('finished');
    await closing;
  });
});
