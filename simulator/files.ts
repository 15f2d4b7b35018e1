import type { SimContext, SimRequest, SimRoute } from './server.js';

/**
 * Files the simulator hands out by URL (dall-e style `url` results, prediction outputs), per
 * simulator instance, the oldest dropped past a bound so a long-running quickstart does not grow.
 */
const MAX_FILES = 200;
const stores = new WeakMap<SimContext, Map<string, { data: Buffer; type: string }>>();

function filesOf(sim: SimContext) {
  let m = stores.get(sim);
  if (!m) stores.set(sim, (m = new Map<string, { data: Buffer; type: string }>()));
  return m;
}

/** Keeps `data` and returns its URL on this simulator. */
export function publishFile(sim: SimContext, name: string, data: Buffer, type = 'image/png'): string {
  const m = filesOf(sim);
  m.set(name, { data, type });
  if (m.size > MAX_FILES) m.delete(m.keys().next().value!);
  return `${sim.url}/files/${encodeURIComponent(name)}`;
}

function serve(r: SimRequest): void {
  const f = filesOf(r.sim).get(r.params.name ?? '');
  if (!f) {
    r.res.writeHead(404, { 'content-type': 'application/json' });
    r.res.end(JSON.stringify({ error: { message: 'simulator: no such file', type: 'invalid_request_error' } }));
    return;
  }
  r.res.writeHead(200, { 'content-type': f.type, 'content-length': f.data.length });
  r.res.end(f.data);
}

export const fileRoutes: SimRoute[] = [{ method: 'GET', path: '/files/:name', handler: serve }];
