/**
 * Cheap string scans for the stream taps: they let a tap skip JSON.parse on the many delta
 * events that carry no usage.
 */

/** Length (in UTF-16 units, escapes included) of the first string value of one of the keys. */
export function stringValueLength(data: string, keys: readonly string[]): number {
  for (const key of keys) {
    const at = data.indexOf(key);
    if (at === -1) continue;
    const start = at + key.length;
    let i = start;
    for (;;) {
      const q = data.indexOf('"', i);
      if (q === -1) return data.length - start;
      let bs = 0;
      for (let k = q - 1; k >= start && data.charCodeAt(k) === 92; k--) bs++;
      if (bs % 2 === 0) return q - start;
      i = q + 1;
    }
  }
  return 0;
}

/** True when `"<name>"` is followed by an object (not null): `"usage":{` with optional spaces. */
export function hasObjectField(data: string, name: string): boolean {
  let from = 0;
  for (;;) {
    const at = data.indexOf(name, from);
    if (at === -1) return false;
    let i = at + name.length;
    while (i < data.length && (data.charCodeAt(i) === 32 || data.charCodeAt(i) === 58)) i++;
    if (data.charCodeAt(i) === 123) return true;
    from = at + name.length;
  }
}

export function parseObject(data: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(data);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export function obj(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/**
 * An SSE event's type: its `event:` name, else the `"type"` its data starts with (some
 * compatible servers send no `event:` lines).
 */
export function eventType(event: string, data: string): string {
  if (event) return event;
  const at = data.indexOf('"type":"');
  if (at === -1) return '';
  const end = data.indexOf('"', at + 8);
  return end === -1 ? '' : data.slice(at + 8, end);
}
