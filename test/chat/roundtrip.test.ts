import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { IrMessage, IrPart, IrRequest, IrTool } from '../../proxy/ir/chat.js';
import { decodeChatRequest } from '../../proxy/protocols/chat-completions/codec.js';
import { decodeMessagesRequest } from '../../proxy/protocols/messages/codec.js';
import { encodeMessagesRequest } from '../../proxy/upstreams/anthropic/messages-codec.js';
import { decodeResponsesRequest } from '../../proxy/protocols/responses/codec.js';
import { encodeChatRequest } from '../../proxy/upstreams/openai/chat-codec.js';
import { encodeResponsesRequest } from '../../proxy/upstreams/openai/responses-codec.js';

/**
 * IR -> a wire -> IR keeps every part the wire can carry: what an upstream codec writes, the
 * client codec of the same wire reads back as it was (a Claude Code request decoded and re-encoded
 * for Anthropic, an OpenAI request for OpenAI, lose nothing on the way).
 */
const word = fc.string({ minLength: 1, maxLength: 12 }).filter((s) => s.trim() !== '');
const name = fc.stringMatching(/^[a-z][a-z0-9_]{0,15}$/);
const id = fc.stringMatching(/^[a-zA-Z0-9_]{4,12}$/);
const args = fc.dictionary(name, fc.oneof(word, fc.integer(), fc.boolean()), { maxKeys: 3 }).map((o) => JSON.stringify(o));

const text = word.map((t): IrPart => ({ type: 'text', text: t }));
const image = fc.webUrl().map((url): IrPart => ({ type: 'image', url }));
const pdf = fc
  .record({ data: fc.base64String({ minLength: 4, maxLength: 40 }), filename: fc.stringMatching(/^[a-z]{1,8}\.pdf$/) })
  .map(({ data, filename }): IrPart => ({ type: 'document', mediaType: 'application/pdf', data, filename }));
const call = fc.record({ id, name, args }).map(({ id: i, name: n, args: a }): IrPart => ({ type: 'tool_call', id: i, name: n, arguments: a }));
const result = fc.record({ id, content: word }).map(({ id: i, content }): IrPart => ({ type: 'tool_result', callId: i, content }));
const signed = fc.record({ t: word, sig: id }).map(({ t, sig }): IrPart => ({ type: 'reasoning', text: t, signature: sig }));

/** Alternating turns starting with the user; tool results only in a user turn of their own, after a turn with calls. */
function conversation(withReasoning: boolean): fc.Arbitrary<IrMessage[]> {
  const assistant = fc
    .record({
      reasoning: withReasoning ? fc.option(signed, { nil: undefined }) : fc.constant(undefined),
      text: fc.option(text, { nil: undefined }),
      calls: fc.array(call, { maxLength: 2 }),
    })
    .filter((a) => a.text !== undefined || a.calls.length > 0)
    .map((a): IrMessage => ({ role: 'assistant', content: [...(a.reasoning ? [a.reasoning] : []), ...(a.text ? [a.text] : []), ...a.calls] }));
  const user = fc.array(fc.oneof(text, image, pdf), { minLength: 1, maxLength: 3 }).map((content): IrMessage => ({ role: 'user', content }));
  return fc.array(fc.tuple(user, assistant), { minLength: 1, maxLength: 3 }).chain((pairs) => {
    const out: IrMessage[] = [];
    for (const [u, a] of pairs) {
      const last = out.at(-1);
      const calls = last?.content.filter((p) => p.type === 'tool_call') ?? [];
      // Results answer the previous turn's calls (an assistant turn with calls is followed by them).
      if (calls.length) out.push({ role: 'user', content: calls.map((c) => ({ type: 'tool_result', callId: (c as { id: string }).id, content: 'ok' })) }, a);
      else out.push(u, a);
    }
    out.push({ role: 'user', content: [{ type: 'text', text: 'next' }] });
    return fc.constant(out.filter((m, i) => !(m.role === 'assistant' && out[i + 1]?.role === 'assistant')));
  });
}

const tools = fc
  .uniqueArray(fc.record({ name, description: word }), { selector: (t) => t.name, maxLength: 2 })
  .map((ts) => ts.map((t): IrTool => ({ name: t.name, description: t.description, parameters: { type: 'object', properties: { q: { type: 'string' } } } })));

function request(withReasoning: boolean): fc.Arbitrary<IrRequest> {
  return fc
    .record({
      system: fc.array(word, { maxLength: 1 }),
      messages: conversation(withReasoning),
      tools,
      cap: fc.integer({ min: 1, max: 64_000 }),
      stream: fc.boolean(),
    })
    .map((r): IrRequest => ({
      system: r.system,
      messages: r.messages,
      tools: r.tools,
      maxOutputTokens: r.cap,
      stream: r.stream,
      ...(r.tools.length ? { toolChoice: { type: 'auto' } } : {}),
    }));
}

describe('IR -> wire -> IR', () => {
  it('Anthropic Messages keeps every part (thinking with its signature included)', () => {
    fc.assert(
      fc.property(request(true), (ir) => {
        const body = encodeMessagesRequest(ir, 'm', ir.maxOutputTokens!);
        const back = decodeMessagesRequest(body).ir;
        expect(back).toEqual({ ...ir, system: ir.system.length ? [ir.system.join('\n\n')] : [] });
      }),
      { numRuns: 300 },
    );
  });

  it('OpenAI Chat Completions keeps every part it can carry', () => {
    fc.assert(
      fc.property(request(false), (ir) => {
        const body = encodeChatRequest(ir, 'm', { openaiItself: true });
        const back = decodeChatRequest(body).ir;
        expect(back).toEqual(ir);
      }),
      { numRuns: 300 },
    );
  });

  it('OpenAI Responses keeps every part it can carry (input items, function calls and their outputs)', () => {
    fc.assert(
      fc.property(request(false), (ir) => {
        const body = encodeResponsesRequest(ir, 'm', ir.maxOutputTokens!);
        const back = decodeResponsesRequest(body).ir;
        // Responses takes no cap under 16: a smaller one goes as 16.
        expect(back).toEqual({ ...ir, maxOutputTokens: Math.max(ir.maxOutputTokens!, 16), system: ir.system.length ? [ir.system.join('\n\n')] : [] });
      }),
      { numRuns: 300 },
    );
  });
});
