/**
 * The request heads the lean front serves itself (lean.ts): a strict subset of HTTP/1.1 that a
 * chat client sends, parsed by one pure function. Anything outside it is not an error here: the
 * connection goes to node:http, which answers it as it always has (its 400, 413, 431, 100
 * Continue, chunked bodies, upgrades). So this parser never has to be lenient, and a head two
 * parsers could read differently (request smuggling's raw material) is never read by this one.
 */

export interface LeanHead {
  url: string;
  /** Names lowercased, each present once (a repeated name, or one Object.prototype has, is not in the subset). */
  headers: Record<string, string>;
  contentLength: number;
  /** Bytes of the head, its blank line included. */
  size: number;
}

export interface HeadLimits {
  /** node:http's --max-http-header-size (16 KiB by default): a longer head is node:http's 431. */
  maxHeadBytes: number;
  /** Most header lines served lean. */
  maxHeaders: number;
}

export const DEFAULT_HEAD_LIMITS: HeadLimits = { maxHeadBytes: 16 * 1024, maxHeaders: 100 };

// RFC 9110 5.1 token, 5.5 field-value (obs-text read as latin1, as node:http reads it), and an
// origin-form target of RFC 3986's characters. The name and value checks are tables, not regular
// expressions: a test of one cost ~500 instructions, and a head has two per field (callgrind).
const REQUEST_LINE = /^POST (\/[A-Za-z0-9\-._~%!$&'()*+,;=:@/?]*) HTTP\/1\.1$/;
const DIGITS = /^[0-9]{1,15}$/;
/** 1: a token character, 2: an upper-case letter (a token character too). */
const TOKEN_CHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz") TOKEN_CHAR[c.charCodeAt(0)] = 1;
for (let c = 65; c <= 90; c++) TOKEN_CHAR[c] = 2;

/** 0: not a token; 1: a token; 2: a token with an upper-case letter. */
export function tokenKind(s: string, from: number, to: number): number {
  if (from === to) return 0;
  let kind = 1;
  for (let i = from; i < to; i++) {
    const t = TOKEN_CHAR[s.charCodeAt(i)] ?? 0;
    if (t === 0) return 0;
    if (t === 2) kind = 2;
  }
  return kind;
}

/** VCHAR, obs-text, SP and HTAB: no CR, LF, NUL or other control character, no DEL. */
export function fieldValue(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 9) || c === 0x7f || c > 0xff) return false;
  }
  return true;
}

/**
 * Headers that make a request node:http's: a framing or a connection the lean front does not
 * speak (a chunked body, 100-continue, an upgrade, a connection to close after the answer).
 */
const NOT_LEAN = new Set(['transfer-encoding', 'expect', 'upgrade', 'http2-settings', 'te', 'trailer', '__proto__', 'constructor']);

/**
 * The head in `s` (latin1, one character per byte) up to and including its blank line at
 * `blank` (the offset of its "\r\n\r\n"), or undefined when it is outside the subset.
 */
export function parseHead(s: string, blank: number, limits: HeadLimits = DEFAULT_HEAD_LIMITS): LeanHead | undefined {
  const size = blank + 4;
  if (size > limits.maxHeadBytes) return undefined;
  let eol = s.indexOf('\r\n');
  const line = REQUEST_LINE.exec(s.slice(0, eol));
  if (!line) return undefined;
  // A plain object, as node:http's: a name Object.prototype has ("constructor", "__proto__") reads
  // as present below, and such a head is node:http's.
  const headers: Record<string, string> = {};
  const seen = new Set<string>();
  let count = 0;
  let contentLength = -1;
  let host = false;
  let p = eol + 2;
  while (p < size - 2) {
    eol = s.indexOf('\r\n', p);
    const colon = s.indexOf(':', p);
    if (colon === -1 || colon > eol || ++count > limits.maxHeaders) return undefined;
    const kind = tokenKind(s, p, colon);
    if (kind === 0) return undefined;
    let a = colon + 1;
    let b = eol;
    while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
    while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
    // A CR or LF of its own in the value, or any other control character.
    if (!fieldValue(s, a, b)) return undefined;
    const value = s.slice(a, b);
    const raw = s.slice(p, colon);
    const name = kind === 2 ? raw.toLowerCase() : raw;
    if (seen.has(name) || NOT_LEAN.has(name)) return undefined;
    seen.add(name);
    if (name === 'content-length') {
      if (!DIGITS.test(value)) return undefined;
      contentLength = Number(value);
    } else if (name === 'connection') {
      if (value.toLowerCase() !== 'keep-alive') return undefined;
    } else if (name === 'host') host = true;
    headers[name] = value;
    p = eol + 2;
  }
  if (contentLength < 0 || !host) return undefined;
  return { url: line[1]!, headers, contentLength, size };
}
