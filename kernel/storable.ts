/**
 * PostgreSQL's text and jsonb cannot hold a NUL character, and a lone UTF-16 surrogate is not
 * Unicode at all (jsonb refuses its escape; text would get U+FFFD in its place). A string that
 * may reach the store is checked first, so the client gets a 400 naming it instead of a 500.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function unstorable(s: string): boolean {
  return UNSTORABLE.test(s);
}

/**
 * The path (`a.b[2]`, `a.<key>` for a bad key) of the first string or key in `value` the store
 * cannot hold, if any. Iterative: a body nested 100,000 deep must not overflow the stack.
 */
export function findUnstorable(value: unknown): string | undefined {
  const stack: [unknown, string][] = [[value, '']];
  while (stack.length) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (unstorable(v)) return path || '(body)';
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v !== null && typeof v === 'object') {
      const entries: [string, unknown][] = Object.entries(v as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, inner] = entries[i]!;
        if (unstorable(k)) return path ? `${path}.<key>` : '<key>';
        stack.push([inner, path ? `${path}.${k}` : k]);
      }
    }
  }
  return undefined;
}
