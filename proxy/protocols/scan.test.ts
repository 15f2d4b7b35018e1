import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { eventType, hasObjectField, jsonKey, stringValueLength } from './scan.js';

// The reference the scans must agree with on any input: a plain indexOf of the whole quoted key
// (what they did before looking for it from its second character), and a string's end read by a
// regular expression (escape pairs skipped) rather than by counting backslashes.
const STRING_BODY = /^(?:[^"\\]|\\[\s\S])*/;

function referenceValueLength(data: string, keys: string[]): number {
  for (const key of keys) {
    const at = data.indexOf(key);
    if (at === -1) continue;
    const start = at + key.length;
    const body = STRING_BODY.exec(data.slice(start))![0].length;
    // Unterminated (no closing quote, or a lone backslash last): the rest of the data.
    return data.charCodeAt(start + body) === 34 ? body : data.length - start;
  }
  return 0;
}

function referenceHasObject(data: string, name: string): boolean {
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

// Inputs made of the pieces that matter: the keys and their fragments, quotes, backslashes,
// colons, braces, spaces and plain text, so that near-misses (`usage"` without its quote, `""usage"`,
// a key at offset 0 or at the very end) come up often.
const piece = fc.constantFrom(
  '"',
  '\\',
  '\\\\',
  '\\"',
  ':',
  '{',
  '}',
  ' ',
  'null',
  'usage',
  'usage"',
  '"usage"',
  '"usage":',
  'content":"',
  '"content":"',
  '"reasoning_content":"',
  'type":"',
  '"type":"',
  'message_stop',
  'x',
  'é',
);
const text = fc.array(fc.oneof(piece, fc.string({ maxLength: 4 })), { maxLength: 40 }).map((a) => a.join(''));

describe('JSON key scans', () => {
  it('agree with a plain indexOf of the quoted key on any input', () => {
    const keys = ['"content":"', '"reasoning_content":"', '"refusal":"'];
    const prepared = keys.map(jsonKey);
    const usage = jsonKey('"usage"');
    fc.assert(
      fc.property(text, (data) => {
        expect(stringValueLength(data, prepared)).toBe(referenceValueLength(data, keys));
        expect(hasObjectField(data, usage)).toBe(referenceHasObject(data, '"usage"'));
        const at = data.indexOf('"type":"');
        const end = at === -1 ? -1 : data.indexOf('"', at + 8);
        expect(eventType('', data)).toBe(at === -1 || end === -1 ? '' : data.slice(at + 8, end));
      }),
      { numRuns: 3000 },
    );
  });

  it('find a key at the start, after a false start and at the end', () => {
    const usage = jsonKey('"usage"');
    expect(hasObjectField('"usage":{"a":1}', usage)).toBe(true);
    expect(hasObjectField('{"xusage":{},"usage" : {}}', usage)).toBe(true);
    expect(hasObjectField('{"usage":null,"note":"usage"}', usage)).toBe(false);
    // The key's closing quote is not the opening quote of a next one.
    expect(hasObjectField('"usage"usage"{', usage)).toBe(false);
    // `xcontent":"` holds the key's bare form without its quote: a false start.
    expect(stringValueLength('{"xcontent":"q","content":"abc\\"d"}', [jsonKey('"content":"')])).toBe(6);
    // An escaped backslash before the quote: the string ends there.
    expect(stringValueLength('{"content":"a\\\\"}', [jsonKey('"content":"')])).toBe(3);
    expect(() => jsonKey('usage')).toThrow(/quote/);
  });
});
