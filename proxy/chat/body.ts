/**
 * Rewrites a request body for passthrough without re-serialising it: the top-level members the
 * gateway changes (model, stream, stream_options) are located by a byte scanner and spliced;
 * every other byte reaches the upstream exactly as the client sent it (number spellings, escapes,
 * key order, whitespace). Bodies of coding agents run to 100 KB+, so this is also cheaper than
 * JSON.stringify.
 */

const QUOTE = 34;
const BACKSLASH = 92;

interface Span {
  /** Offset of the key's opening quote. */
  keyStart: number;
  valueStart: number;
  valueEnd: number;
}

function isWs(c: number | undefined): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

// The scan reads the body as a latin1 string, one character per byte: its offsets are the
// body's byte offsets, and every character it looks for is ASCII, which no byte of a multi-byte
// UTF-8 character equals. A string's indexOf is V8's own; a Buffer's goes through Node's
// bindings on each call (a few hundred instructions), and a body is mostly strings to skip.

/** Offset just past the string starting at `i` (a quote). */
function skipString(s: string, i: number): number {
  let p = i + 1;
  for (;;) {
    const q = s.indexOf('"', p);
    if (q === -1) throw new Error('unterminated string');
    let bs = 0;
    for (let k = q - 1; k > i && s.charCodeAt(k) === BACKSLASH; k--) bs++;
    if (bs % 2 === 0) return q + 1;
    p = q + 1;
  }
}

function skipValue(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === QUOTE) return skipString(s, i);
  if (c === 123 || c === 91) {
    let depth = 0;
    let p = i;
    while (p < s.length) {
      const d = s.charCodeAt(p);
      if (d === QUOTE) {
        p = skipString(s, p);
        continue;
      }
      if (d === 123 || d === 91) depth++;
      else if (d === 125 || d === 93) {
        depth--;
        if (depth === 0) return p + 1;
      }
      p++;
    }
    throw new Error('unterminated value');
  }
  let p = i;
  while (p < s.length) {
    const d = s.charCodeAt(p);
    if (d === 44 || d === 125 || d === 93 || isWs(d)) break;
    p++;
  }
  return p;
}

/** The spans of the wanted top-level members of the body read as latin1 (the last one wins, as in JSON.parse). */
function scanTopLevel(s: string, wanted: ReadonlySet<string>): { open: number; members: Map<string, Span> } {
  // charCodeAt past the end is NaN, which no test below matches.
  let p = 0;
  while (isWs(s.charCodeAt(p))) p++;
  if (s.charCodeAt(p) !== 123) throw new Error('not an object');
  const open = p;
  p++;
  const members = new Map<string, Span>();
  for (;;) {
    while (isWs(s.charCodeAt(p))) p++;
    if (s.charCodeAt(p) === 125) break;
    if (s.charCodeAt(p) !== QUOTE) throw new Error('expected a key');
    const keyStart = p;
    const keyEnd = skipString(s, p);
    let name: string | undefined;
    // Only short keys can be wanted (up to 6 bytes a letter when escaped as \\uXXXX); escapes are
    // decoded via JSON.parse in the rare case they occur, so the key is the one JSON.parse saw.
    // A key with bytes past ASCII reads differently in latin1 than in UTF-8, but either way it
    // holds a character past ASCII, so it equals no wanted name, as with the UTF-8 reading.
    if (keyEnd - keyStart <= 200) {
      const rawKey = s.slice(keyStart + 1, keyEnd - 1);
      if (rawKey.includes('\\')) name = JSON.parse(`"${rawKey}"`) as string;
      else if (rawKey.length <= 32) name = rawKey;
    }
    p = keyEnd;
    while (isWs(s.charCodeAt(p))) p++;
    if (s.charCodeAt(p) !== 58) throw new Error('expected a colon');
    p++;
    while (isWs(s.charCodeAt(p))) p++;
    const valueStart = p;
    p = skipValue(s, p);
    if (name !== undefined && wanted.has(name)) members.set(name, { keyStart, valueStart, valueEnd: p });
    while (isWs(s.charCodeAt(p))) p++;
    if (s.charCodeAt(p) === 44) {
      p++;
      continue;
    }
    if (s.charCodeAt(p) === 125) break;
    throw new Error('expected , or }');
  }
  return { open, members };
}

/**
 * The value of the top-level member `name` of a JSON object, as text: what JSON.parse would
 * read as `.name`, without reading the rest (an answer runs to hundreds of KB). The member is
 * usually the last or nearly so (usage is), so the body's last `"name"` key is tried first: it
 * is the top-level one when what follows its value is top-level members and the closing brace,
 * none of them spelling a key with escapes. Otherwise the whole object is scanned.
 */
export function topLevelMember(buf: Buffer, name: string): string | undefined {
  const s = buf.toString('latin1');
  const span = lastMember(s, name) ?? scanTopLevel(s, new Set([name])).members.get(name);
  return span ? buf.toString('utf8', span.valueStart, span.valueEnd) : undefined;
}

function lastMember(s: string, name: string): Span | undefined {
  // From the end: what it reads does not grow with the answer.
  const keyStart = s.lastIndexOf(`"${name}"`);
  if (keyStart <= 0) return undefined;
  // A key follows `{` or `,`; a quote after a backslash is inside a string.
  let b = keyStart - 1;
  while (isWs(s.charCodeAt(b))) b--;
  if (s.charCodeAt(b) !== 123 && s.charCodeAt(b) !== 44) return undefined;
  let p = keyStart + name.length + 2;
  while (isWs(s.charCodeAt(p))) p++;
  if (s.charCodeAt(p) !== 58) return undefined;
  p++;
  while (isWs(s.charCodeAt(p))) p++;
  const valueStart = p;
  p = skipValue(s, p);
  const valueEnd = p;
  // Were the key nested, what follows would close more than one level.
  for (;;) {
    while (isWs(s.charCodeAt(p))) p++;
    const c = s.charCodeAt(p);
    if (c === 125) {
      p++;
      while (isWs(s.charCodeAt(p))) p++;
      return p === s.length ? { keyStart, valueStart, valueEnd } : undefined;
    }
    if (c !== 44) return undefined;
    p++;
    while (isWs(s.charCodeAt(p))) p++;
    if (s.charCodeAt(p) !== QUOTE) return undefined;
    const k = p;
    p = skipString(s, p);
    // A later key spelled with escapes could be the same name.
    for (let i = k + 1; i < p - 1; i++) if (s.charCodeAt(i) === BACKSLASH) return undefined;
    while (isWs(s.charCodeAt(p))) p++;
    if (s.charCodeAt(p) !== 58) return undefined;
    p++;
    while (isWs(s.charCodeAt(p))) p++;
    p = skipValue(s, p);
  }
}

const WANTED = new Set(['model', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'max_output_tokens']);

export interface BodyEdits {
  model: string;
  /** Set `"stream": true` (the stream was decided by the default rule). */
  forceStream?: boolean;
  /** Force `stream_options.include_usage: true` (chat completions streams). */
  includeUsage?: boolean;
  /** The parsed body, for stream_options' current value. */
  json: Record<string, unknown>;
  /** An output cap to set (the client sent none, or null): `key` is the member the upstream reads. */
  cap?: { key: string; value: number };
}

/** The client's body with only the edited members changed. Falls back to JSON.stringify if the scan fails. */
export function rewriteBody(raw: Buffer, edits: BodyEdits): Buffer {
  // Nothing to change (the backend's model is the name the client sent): the body as it came,
  // without scanning it (about 15k instructions for a 2 KB body, more for an agent's 100 KB).
  if (edits.json.model === edits.model && !edits.forceStream && !edits.cap && (!edits.includeUsage || includesUsage(edits.json))) return raw;
  try {
    return splice(raw, edits);
  } catch {
    const copy: Record<string, unknown> = { ...edits.json, model: edits.model };
    if (edits.forceStream) copy.stream = true;
    if (edits.includeUsage) copy.stream_options = { ...(edits.json.stream_options as object | undefined), include_usage: true };
    if (edits.cap) copy[edits.cap.key] = edits.cap.value;
    return Buffer.from(JSON.stringify(copy));
  }
}

function includesUsage(json: Record<string, unknown>): boolean {
  const so = json.stream_options;
  return !!so && typeof so === 'object' && (so as Record<string, unknown>).include_usage === true;
}

function splice(raw: Buffer, edits: BodyEdits): Buffer {
  const { open, members } = scanTopLevel(raw.toString('latin1'), WANTED);
  const repl: { start: number; end: number; text: string }[] = [];
  let insert = '';
  const model = members.get('model');
  const modelJson = JSON.stringify(edits.model);
  if (model) repl.push({ start: model.valueStart, end: model.valueEnd, text: modelJson });
  else insert += `"model":${modelJson},`;
  if (edits.forceStream) {
    const s = members.get('stream');
    if (s) repl.push({ start: s.valueStart, end: s.valueEnd, text: 'true' });
    else insert += '"stream":true,';
  }
  if (edits.includeUsage && !includesUsage(edits.json)) {
    const so = members.get('stream_options');
    const current = edits.json.stream_options;
    const value = JSON.stringify({ ...(current && typeof current === 'object' ? current : {}), include_usage: true });
    if (so) repl.push({ start: so.valueStart, end: so.valueEnd, text: value });
    else insert += `"stream_options":${value},`;
  }
  if (edits.cap) {
    const m = members.get(edits.cap.key);
    if (m) repl.push({ start: m.valueStart, end: m.valueEnd, text: String(edits.cap.value) });
    else insert += `${JSON.stringify(edits.cap.key)}:${edits.cap.value},`;
  }
  if (insert) {
    // Inserted members go first, each with its comma, unless the object has no member to follow.
    let p = open + 1;
    while (isWs(raw[p])) p++;
    repl.push({ start: open + 1, end: open + 1, text: raw[p] === 125 ? insert.slice(0, -1) : insert });
  }
  repl.sort((a, b) => a.start - b.start);
  // One allocation and straight copies (Buffer.concat of the pieces cost more than the scan).
  let size = raw.length;
  for (const r of repl) size += Buffer.byteLength(r.text) - (r.end - r.start);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  let o = 0;
  for (const r of repl) {
    out.set(raw.subarray(at, r.start), o);
    o += r.start - at;
    o += out.write(r.text, o);
    at = r.end;
  }
  out.set(raw.subarray(at), o);
  return out;
}
