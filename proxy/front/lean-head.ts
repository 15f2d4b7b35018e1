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
// origin-form target of RFC 3986's characters.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const REQUEST_LINE = /^POST (\/[A-Za-z0-9\-._~%!$&'()*+,;=:@/?]*) HTTP\/1\.1$/;
const DIGITS = /^[0-9]{1,15}$/;

/**
 * Headers that make a request node:http's: a framing or a connection the lean front does not
 * speak (a chunked body, 100-continue, an upgrade, a connection to close after the answer).
 */
const NOT_LEAN = new Set(['transfer-encoding', 'expect', 'upgrade', 'http2-settings', 'te', 'trailer']);

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
  let count = 0;
  let contentLength = -1;
  let host = false;
  let p = eol + 2;
  while (p < size - 2) {
    eol = s.indexOf('\r\n', p);
    const colon = s.indexOf(':', p);
    if (colon === -1 || colon > eol || ++count > limits.maxHeaders) return undefined;
    const rawName = s.slice(p, colon);
    if (!TOKEN.test(rawName)) return undefined;
    let a = colon + 1;
    let b = eol;
    while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
    while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
    const value = s.slice(a, b);
    // A CR or LF of its own in the value, or any other control character.
    if (!FIELD_VALUE.test(value)) return undefined;
    const name = rawName.toLowerCase();
    if (name in headers || NOT_LEAN.has(name)) return undefined;
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
