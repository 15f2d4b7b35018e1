import { describe, expect, it } from 'vitest';
import { SseParser } from '../../proxy/sse/parser.js';
import { encodeEvent, encodeJsonEvent } from '../../proxy/sse/writer.js';

type Ev = [string, string, string | undefined];

function parseAll(chunks: Buffer[], maxEventBytes?: number) {
  const events: Ev[] = [];
  let overflows = 0;
  const p = new SseParser((e, d, id) => events.push([e, d, id]), { maxEventBytes, onOverflow: () => overflows++ });
  const tails = chunks.map((c) => p.push(c));
  return { events, overflows, tails, parser: p };
}

const b = (s: string) => Buffer.from(s, 'utf8');

describe('SseParser', () => {
  it('tells a listener where in the chunk the event it is given began, so a relay can send what came before it', () => {
    const starts: number[] = [];
    const text = 'data: 1\n\n: keep-alive\n\n\nevent: done\ndata: [x]\n\n';
    const p = new SseParser(() => starts.push(p.chunkEventStart));
    p.push(b(text));
    // The second event starts at its comment; the blank line before "event: done" is not part of it.
    expect(starts).toEqual([0, text.indexOf('event: done')]);
    // An event that began in an earlier chunk reports -1.
    const split: number[] = [];
    const q = new SseParser(() => split.push(q.chunkEventStart));
    q.push(b('data: a\n\ndata: b'));
    q.push(b('c\n\ndata: d\n\n'));
    expect(split).toEqual([0, -1, 'c\n\n'.length]);
  });

  it('parses events, multi-line data, ids, comments and unknown fields', () => {
    const { events } = parseAll([b(': hello\n\nevent: a\ndata: 1\ndata: 2\nid: 7\nretry: 10\nfoo: bar\n\ndata:no-space\n\ndata\n\n')]);
    expect(events).toEqual([
      ['a', '1\n2', '7'],
      ['', 'no-space', '7'],
      ['', '', '7'],
    ]);
  });

  it('handles \\r\\n, \\r and \\n line ends, and a \\r\\n split between chunks', () => {
    const { events } = parseAll([b('event: x\r\ndata: 1\r'), b('\n\r'), b('\ndata: 2\r\rdata: 3\n\n')]);
    expect(events).toEqual([
      ['x', '1', undefined],
      ['', '2', undefined],
      ['', '3', undefined],
    ]);
  });

  it('keeps multi-byte UTF-8 characters split between chunks intact', () => {
    const bytes = b('data: héllo 🌍\n\n');
    const { events } = parseAll([bytes.subarray(0, 9), bytes.subarray(9, 16), bytes.subarray(16)]);
    expect(events).toEqual([['', 'héllo 🌍', undefined]]);
  });

  it('does not dispatch an unterminated last event', () => {
    const { events, parser } = parseAll([b('data: 1\n\ndata: 2\n')]);
    expect(events).toHaveLength(1);
    expect(parser.pending).toBe(true);
    parser.end();
    expect(parser.pending).toBe(false);
  });

  it('reports how many trailing bytes belong to an unfinished event', () => {
    const { tails } = parseAll([b('data: 1\n\ndata: 2'), b('2\n'), b('\ndata: 3\n\n'), b(': ping\n\n')]);
    expect(tails).toEqual([7, 2, 0, 0]);
  });

  it('drops an event over the size limit and resynchronises at the next blank line', () => {
    const big = 'x'.repeat(100);
    const { events, overflows } = parseAll([b(`data: small\n\ndata: ${big.slice(0, 50)}`), b(`${big}\ndata: more\n`), b('\ndata: after\n\n')], 64);
    expect(events).toEqual([
      ['', 'small', undefined],
      ['', 'after', undefined],
    ]);
    expect(overflows).toBe(1);
  });

  it('gives the same events however the bytes are split (fuzz)', () => {
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const ends = ['\n', '\r\n', '\r'];
    for (let round = 0; round < 400; round++) {
      const expected: Ev[] = [];
      let text = '';
      const n = 1 + rand(8);
      for (let i = 0; i < n; i++) {
        const eol = ends[rand(3)]!;
        if (rand(4) === 0) text += `: comment ${i}${eol}`;
        const event = rand(2) ? `ev${i}` : '';
        // Some events all ASCII, some not: a chunk is read as a slice of its latin1 text only when it is ASCII.
        const text8 = rand(2) ? 'é🌍' : '';
        const lines = Array.from({ length: 1 + rand(3) }, (_, j) => `{"i":${i},"j":${j},"s":"${text8}${'z'.repeat(rand(20))}"}`);
        if (event) text += `event: ${event}${eol}`;
        for (const l of lines) text += `data: ${l}${eol}`;
        text += eol;
        expected.push([event, lines.join('\n'), undefined]);
      }
      const bytes = b(text);
      const chunks: Buffer[] = [];
      // Small pieces split lines; a third of the rounds also has pieces holding whole events.
      const most = rand(3) === 0 ? bytes.length : 40;
      for (let pos = 0; pos < bytes.length;) {
        const size = 1 + rand(Math.min(most, bytes.length - pos));
        chunks.push(bytes.subarray(pos, pos + size));
        pos += size;
      }
      const { events, tails } = parseAll(chunks);
      // A lone \r at the very end cannot be told apart from \r\n yet; the events are still complete.
      expect(events).toEqual(expected);
      expect(tails[tails.length - 1]).toBe(0);
    }
  });
});

describe('SSE writer', () => {
  it('round-trips data with line breaks through the parser', () => {
    const { events } = parseAll([b(encodeEvent('a\nb\r\nc', 'x', '1') + encodeJsonEvent({ t: 'y\n' }, 'j') + encodeJsonEvent([1]))]);
    expect(events).toEqual([
      ['x', 'a\nb\nc', '1'],
      ['j', '{"t":"y\\n"}', '1'],
      ['', '[1]', '1'],
    ]);
  });
});
