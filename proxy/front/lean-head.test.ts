import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseHead } from './lean-head.js';

const tokenChar = fc.constantFrom(..."!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".split(''));
const name = fc
  .string({ unit: tokenChar, minLength: 1, maxLength: 20 })
  .filter(
    (n) =>
      ![
        '__proto__',
        'constructor',
        'host',
        'content-length',
        'connection',
        'transfer-encoding',
        'expect',
        'upgrade',
        'http2-settings',
        'te',
        'trailer',
      ].includes(n.toLowerCase()),
  );
// Field values: visible ASCII, obs-text and inner spaces and tabs; the ends are trimmed as OWS.
const valueChar = fc.oneof(fc.integer({ min: 0x21, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff })).map((c) => String.fromCharCode(c));
const value = fc
  .tuple(
    fc.string({ unit: valueChar, maxLength: 30 }),
    fc.string({ unit: fc.constantFrom(' ', '\t'), maxLength: 2 }),
    fc.string({ unit: valueChar, maxLength: 30 }),
  )
  .map(([a, ws, b]) => (a && b ? a + ws + b : a + b));
const ows = fc.string({ unit: fc.constantFrom(' ', '\t'), maxLength: 3 });

function head(lines: string[]): { s: string; blank: number } {
  const s = `POST /v1/chat/completions HTTP/1.1\r\n${lines.map((l) => l + '\r\n').join('')}\r\n{"body":1}`;
  return { s, blank: s.indexOf('\r\n\r\n') };
}

describe('parseHead', () => {
  it('reads any head of unique token names and field values, as node:http would (names lowercased, OWS trimmed)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(name, value, ows, ows), { selector: ([n]) => n.toLowerCase(), maxLength: 20 }),
        fc.nat({ max: 1e6 }),
        (fields, length) => {
          const lines = [`Host: gw`, ...fields.map(([n, v, a, b]) => `${n}:${a}${v}${b}`), `Content-Length: ${length}`];
          const { s, blank } = head(lines);
          const parsed = parseHead(s, blank);
          expect(parsed).toBeDefined();
          expect(parsed!.contentLength).toBe(length);
          expect(parsed!.size).toBe(blank + 4);
          expect({ ...parsed!.headers }).toEqual(
            Object.fromEntries([['host', 'gw'], ...fields.map(([n, v]) => [n.toLowerCase(), v]), ['content-length', String(length)]]),
          );
        },
      ),
    );
  });

  it('leaves any head with a control character in a field to node:http', () => {
    const control = fc
      .integer({ min: 0, max: 0x1f })
      .filter((c) => c !== 9)
      .map((c) => String.fromCharCode(c));
    fc.assert(
      fc.property(name, value, control, fc.nat({ max: 30 }), (n, v, c, at) => {
        const bad = v.slice(0, at) + c + v.slice(at);
        const { s, blank } = head(['Host: gw', `${n}: x${bad}x`, 'Content-Length: 0']);
        // One control character cannot make a CR LF of its own with its neighbours here (none is CR or LF).
        expect(parseHead(s, blank)).toBeUndefined();
      }),
    );
  });

  it("leaves names that Object.prototype has to node:http (no header can reach a request's prototype)", () => {
    for (const n of ['__proto__', 'Constructor']) {
      const { s, blank } = head(['Host: gw', `${n}: {}`, 'Content-Length: 0']);
      expect(parseHead(s, blank)).toBeUndefined();
    }
    // Names are lowercased first: these are headers like any other.
    const { s, blank } = head(['Host: gw', 'toString: a', 'hasOwnProperty: b', 'Content-Length: 0']);
    const parsed = parseHead(s, blank)!;
    expect([parsed.headers.tostring, parsed.headers.hasownproperty, Object.getPrototypeOf(parsed.headers)]).toEqual(['a', 'b', Object.prototype]);
  });

  it('takes the query with the path, and refuses what is not origin-form or not POST over HTTP/1.1', () => {
    const one = (line: string) => {
      const s = `${line}\r\nHost: gw\r\nContent-Length: 0\r\n\r\n`;
      return parseHead(s, s.indexOf('\r\n\r\n'));
    };
    expect(one('POST /v1/messages?beta=true HTTP/1.1')?.url).toBe('/v1/messages?beta=true');
    expect(one('POST * HTTP/1.1')).toBeUndefined();
    expect(one('POST http://gw/v1/messages HTTP/1.1')).toBeUndefined();
    expect(one('GET /v1/models HTTP/1.1')).toBeUndefined();
    expect(one('POST /v1/messages HTTP/1.0')).toBeUndefined();
    expect(one('POST /v1/messages HTTP/2.0')).toBeUndefined();
    expect(one('POST  /v1/messages HTTP/1.1')).toBeUndefined();
    expect(one('POST /v1/mes sages HTTP/1.1')).toBeUndefined();
    expect(one('POST /v1/messages#x HTTP/1.1')).toBeUndefined();
  });

  it('keeps to the limits: a longer head or more fields are node:http’s', () => {
    const many = head(['Host: gw', ...Array.from({ length: 10 }, (_, i) => `x-${i}: ${i}`), 'Content-Length: 0']);
    expect(parseHead(many.s, many.blank, { maxHeadBytes: 16384, maxHeaders: 12 })).toBeDefined();
    expect(parseHead(many.s, many.blank, { maxHeadBytes: 16384, maxHeaders: 11 })).toBeUndefined();
    expect(parseHead(many.s, many.blank, { maxHeadBytes: many.blank + 4, maxHeaders: 100 })).toBeDefined();
    expect(parseHead(many.s, many.blank, { maxHeadBytes: many.blank + 3, maxHeaders: 100 })).toBeUndefined();
  });
});
