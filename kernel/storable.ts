/**
 * PostgreSQL's text and jsonb cannot hold a NUL character, and a lone UTF-16 surrogate is not
 * Unicode at all (jsonb refuses its escape; text would get U+FFFD in its place). A string that
 * may reach the store is checked first, so the client gets a 400 naming it instead of a 500.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function unstorable(s: string): boolean {
  return UNSTORABLE.test(s);
}

/** The path (`a.b[2]`, `a.<key>` for a bad key) of the first string or key in `value` the store cannot hold, if any. */
export function findUnstorable(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return unstorable(value) ? path || '(body)' : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = findUnstorable(value[i], `${path}[${i}]`);
      if (p) return p;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const at = path ? `${path}.${k}` : k;
      if (unstorable(k)) return path ? `${path}.<key>` : '<key>';
      const p = findUnstorable(v, at);
      if (p) return p;
    }
  }
  return undefined;
}
