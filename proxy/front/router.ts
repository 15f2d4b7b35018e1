import type { Route } from '../http/context.js';

interface Pattern {
  route: Route;
  parts: string[];
}

export type Match = { route: Route; params: Record<string, string> } | { allowed: string[] } | undefined;

/** Exact paths are one map lookup; ":param" patterns are compared segment by segment. */
export class Router {
  private readonly exact = new Map<string, Map<string, Route>>();
  private readonly patterns: Pattern[] = [];

  constructor(routes: Route[]) {
    for (const r of routes) this.add(r);
  }

  add(route: Route): void {
    if (route.path.includes('/:')) {
      this.patterns.push({ route, parts: route.path.split('/') });
      return;
    }
    let byMethod = this.exact.get(route.path);
    if (!byMethod) this.exact.set(route.path, (byMethod = new Map<string, Route>()));
    if (byMethod.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`);
    byMethod.set(route.method, route);
  }

  /** A route, or the methods the path allows (405), or undefined (404). */
  match(method: string, path: string): Match {
    const byMethod = this.exact.get(path);
    if (byMethod) {
      const r = byMethod.get(method) ?? (method === 'HEAD' ? byMethod.get('GET') : undefined);
      return r ? { route: r, params: {} } : { allowed: [...byMethod.keys()] };
    }
    const segs = path.split('/');
    const allowed: string[] = [];
    for (const p of this.patterns) {
      if (p.parts.length !== segs.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < segs.length; i++) {
        const part = p.parts[i]!;
        const seg = segs[i]!;
        if (part.startsWith(':')) {
          if (!seg) {
            ok = false;
            break;
          }
          try {
            params[part.slice(1)] = decodeURIComponent(seg);
          } catch {
            ok = false;
            break;
          }
        } else if (part !== seg) {
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      if (p.route.method === method) return { route: p.route, params };
      allowed.push(p.route.method);
    }
    return allowed.length ? { allowed } : undefined;
  }
}
