import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rewriteBody, topLevelMember } from './body.js';

/** A JSON text of `value` with the client's own spelling: random whitespace and escaped key letters. */
function spelled(value: Record<string, unknown>, ws: string, escapeKeys: boolean): string {
  const key = (k: string) => (escapeKeys ? `"${[...k].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(k));
  return `${ws}{${Object.entries(value)
    .map(([k, v]) => `${ws}${key(k)}${ws}:${ws}${JSON.stringify(v, null, ws.length ? 1 : 0)}`)
    .join(`,${ws}`)}${ws}}${ws}`;
}

// Text past ASCII too: the scan reads bytes, and a multi-byte character must not move an edit.
const text = (o: { maxLength?: number; minLength?: number } = {}) => fc.string({ unit: 'grapheme', ...o });

const member = fc.oneof(
  text(),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.jsonValue(), { maxLength: 3 }),
  fc.dictionary(text(), fc.jsonValue(), { maxKeys: 3 }),
);

describe('rewriteBody', () => {
  it('sets model, stream, include_usage and the cap; every other member keeps its value', () => {
    fc.assert(
      fc.property(
        fc.dictionary(text({ maxLength: 12 }), member, { maxKeys: 6 }),
        fc.record({ model: fc.option(text()), stream: fc.option(fc.boolean()), max_tokens: fc.option(fc.nat()) }, { requiredKeys: [] }),
        text({ minLength: 1, maxLength: 20 }),
        fc.constantFrom('', ' ', '\n  ', '\t'),
        fc.boolean(),
        fc.boolean(),
        fc.option(fc.nat({ max: 100000 })),
        (others, wanted, model, ws, escapeKeys, forceStream, cap) => {
          const body: Record<string, unknown> = { ...others };
          for (const [k, v] of Object.entries(wanted)) if (v !== null) body[k] = v;
          const raw = Buffer.from(spelled(body, ws, escapeKeys));
          const json = JSON.parse(raw.toString()) as Record<string, unknown>;
          const out = rewriteBody(raw, {
            model,
            json,
            forceStream,
            includeUsage: forceStream,
            ...(cap !== null ? { cap: { key: 'max_tokens', value: cap } } : {}),
          });
          const expected: Record<string, unknown> = { ...json, model };
          if (forceStream) {
            expected.stream = true;
            expected.stream_options = { ...(json.stream_options && typeof json.stream_options === 'object' ? json.stream_options : {}), include_usage: true };
          }
          if (cap !== null) expected.max_tokens = cap;
          expect(JSON.parse(out.toString())).toEqual(expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('leaves the bytes it does not edit exactly as the client sent them', () => {
    const raw = Buffer.from('{ "messages" : [ {"content":"caf\\u00e9 \\"q\\" 1e3"} ], "model":"mine",  "temperature": 1.0E0 }');
    const out = rewriteBody(raw, { model: 'théirs', json: JSON.parse(raw.toString()) as Record<string, unknown> });
    expect(out.toString()).toBe('{ "messages" : [ {"content":"caf\\u00e9 \\"q\\" 1e3"} ], "model":"théirs",  "temperature": 1.0E0 }');
  });

  it('passes the body on as it came when the model is the one the client named and nothing else changes', () => {
    const raw = Buffer.from('{"model":"gpt-4o","model":"m\\u0069ne","stream":true,"stream_options":{"include_usage":true}}');
    const json = JSON.parse(raw.toString()) as Record<string, unknown>;
    expect(rewriteBody(raw, { model: 'mine', json, includeUsage: true })).toBe(raw);
    // Any edit still splices, and the last "model" is the one edited.
    expect(rewriteBody(raw, { model: 'mine', json, cap: { key: 'max_tokens', value: 5 } }).toString()).toBe(
      '{"max_tokens":5,"model":"gpt-4o","model":"mine","stream":true,"stream_options":{"include_usage":true}}',
    );
    const noUsage = Buffer.from('{"model":"mine","stream":true}');
    expect(rewriteBody(noUsage, { model: 'mine', json: { model: 'mine', stream: true }, includeUsage: true }).toString()).toBe(
      '{"stream_options":{"include_usage":true},"model":"mine","stream":true}',
    );
  });

  it('edits no member whose key differs from a wanted name in one letter', () => {
    const raw = Buffer.from('{"model":"c","Model":"a","modeL":"b","streaM":false,"max_tokenz":1}');
    const out = rewriteBody(raw, {
      model: 'n',
      forceStream: true,
      json: JSON.parse(raw.toString()) as Record<string, unknown>,
      cap: { key: 'max_tokens', value: 9 },
    });
    expect(out.toString()).toBe('{"stream":true,"max_tokens":9,"model":"n","Model":"a","modeL":"b","streaM":false,"max_tokenz":1}');
  });

  it('finds the members after keys and values written in characters past ASCII', () => {
    // "modél" is not "model", and 'ĭ' (U+012D) is 0xC4 0xAD in UTF-8: neither byte may read as a quote or bracket.
    const raw = Buffer.from('{"modél":"ĭ\\"}]","messages":[{"content":"日本語 🙂 }]\\\\"}],"model":"m","stream":false}');
    const out = rewriteBody(raw, { model: 'n', forceStream: true, json: JSON.parse(raw.toString()) as Record<string, unknown> });
    expect(out.toString()).toBe('{"modél":"ĭ\\"}]","messages":[{"content":"日本語 🙂 }]\\\\"}],"model":"n","stream":true}');
  });
});

describe('topLevelMember', () => {
  // Members in any order, duplicates included, with "usage" also nested, inside strings and as
  // a value, its key sometimes spelled with escapes: the answer must be what JSON.parse reads.
  const usage = fc.dictionary(fc.constantFrom('input_tokens', 'output_tokens', 'usage'), fc.oneof(fc.nat(), text()), { maxKeys: 3 });
  const tricky = fc.oneof(
    member,
    usage,
    fc.constantFrom('usage', '"usage":1', '\\"usage\\":', '}'),
    fc.array(fc.oneof(usage, fc.constant('usage')), { maxLength: 3 }),
    fc.record({ usage, x: fc.array(usage, { maxLength: 2 }) }),
  );
  const entry = fc.tuple(
    fc.oneof(fc.constantFrom('usage', 'id', 'model', 'choices', 'x\\"usage'), fc.constant('usage'), text({ maxLength: 6 })),
    tricky,
    fc.boolean(),
  );

  it('reads what JSON.parse reads as .usage, however the answer is written', () => {
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 7 }), fc.constantFrom('', ' ', '\n  '), (entries, ws) => {
        const key = (k: string, escape: boolean) =>
          escape ? `"${[...k].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(k);
        const raw = Buffer.from(`${ws}{${entries.map(([k, v, esc]) => `${ws}${key(k, esc)}${ws}:${ws}${JSON.stringify(v)}`).join(`,${ws}`)}${ws}}${ws}`);
        const parsed = JSON.parse(raw.toString()) as Record<string, unknown>;
        const text = topLevelMember(raw, 'usage');
        if (!Object.hasOwn(parsed, 'usage')) expect(text).toBeUndefined();
        else expect(JSON.parse(text!)).toEqual(parsed.usage);
      }),
      { numRuns: 2000 },
    );
  });

  it('finds a usage that is not the last member, and none that is only nested', () => {
    const answer = (tail: string) => Buffer.from(`{"id":"x","usage":{"output_tokens":3}${tail}}`);
    expect(topLevelMember(answer(''), 'usage')).toBe('{"output_tokens":3}');
    expect(topLevelMember(answer(',"metadata":{"usage":"no"},"user":null'), 'usage')).toBe('{"output_tokens":3}');
    expect(topLevelMember(answer(',"u\\u0073age":7'), 'usage')).toBe('7');
    expect(topLevelMember(Buffer.from('{"a":{"usage":1},"b":[{"usage":2}]}'), 'usage')).toBeUndefined();
    expect(topLevelMember(Buffer.from('{"a":"\\"usage\\":1","usage":2}'), 'usage')).toBe('2');
  });
});
