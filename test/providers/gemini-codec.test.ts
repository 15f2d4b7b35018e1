import { describe, expect, it } from 'vitest';
import type { IrRequest, IrStreamPart } from '../../proxy/ir/chat.js';
import { encodeGeminiRequest } from '../../proxy/upstreams/gemini/request.js';
import { decodeGeminiResponse, GeminiStreamDecoder } from '../../proxy/upstreams/gemini/response.js';

/**
 * The Gemini codec's table: IR requests and the generateContent bodies they become; answers and
 * streams in the shapes Google documents (ai.google.dev/api/generate-content, thought
 * signatures, usageMetadata) and the IR they give.
 */
const base: IrRequest = { system: [], messages: [], tools: [], stream: false };

describe('request encoding', () => {
  const cases: [string, IrRequest, string, Record<string, unknown>][] = [
    [
      'text, images (inline, data URL, remote file), system, sampling',
      {
        ...base,
        system: ['Be brief.', 'Use metric units.'],
        temperature: 0.2,
        topP: 0.9,
        stop: ['a', 'b', 'c', 'd', 'e', 'f'],
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is this?' },
              { type: 'image', data: 'iVBOR', mediaType: 'image/png' },
              { type: 'image', url: 'data:image/jpeg;base64,/9j/4A' },
              { type: 'image', url: 'https://example.com/cat.webp?x=1' },
            ],
          },
        ],
      },
      'gemini-2.5-flash',
      {
        contents: [
          {
            role: 'user',
            parts: [
              { text: 'What is this?' },
              { inlineData: { mimeType: 'image/png', data: 'iVBOR' } },
              { inlineData: { mimeType: 'image/jpeg', data: '/9j/4A' } },
              { fileData: { fileUri: 'https://example.com/cat.webp?x=1', mimeType: 'image/webp' } },
            ],
          },
        ],
        systemInstruction: { parts: [{ text: 'Be brief.' }, { text: 'Use metric units.' }] },
        generationConfig: { maxOutputTokens: 100, temperature: 0.2, topP: 0.9, stopSequences: ['a', 'b', 'c', 'd', 'e'] },
      },
    ],
    [
      'tools, a forced tool, a JSON schema answer, a thinking budget inside the cap',
      {
        ...base,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }],
        tools: [{ name: 'f', description: 'd', parameters: { type: 'object', additionalProperties: false } }],
        toolChoice: { type: 'tool', name: 'f' },
        responseFormat: { type: 'json_schema', name: 'x', schema: { type: 'object' } },
        reasoning: { budgetTokens: 500 },
      },
      'gemini-2.5-pro',
      {
        contents: [{ role: 'user', parts: [{ text: 'go' }] }],
        tools: [{ functionDeclarations: [{ name: 'f', description: 'd', parametersJsonSchema: { type: 'object', additionalProperties: false } }] }],
        toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['f'] } },
        generationConfig: {
          maxOutputTokens: 100,
          responseMimeType: 'application/json',
          responseJsonSchema: { type: 'object' },
          thinkingConfig: { thinkingBudget: 100, includeThoughts: true },
        },
      },
    ],
    [
      'a tool loop: signatures back on their parts, foreign signatures and unsigned thoughts left out, parallel results in one turn by name',
      {
        ...base,
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'q' }] },
          {
            role: 'assistant',
            content: [
              { type: 'reasoning', text: 'a summary', signature: 'anthropic-sig' },
              { type: 'reasoning', text: 'unsigned summary' },
              { type: 'reasoning', text: '', signature: 'gemini:SIG1' },
              { type: 'tool_call', id: 'c1', name: 'a', arguments: '{"x":1}' },
              { type: 'tool_call', id: 'c2', name: 'b', arguments: 'not json' },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', callId: 'c1', content: '{"ok":true}' },
              { type: 'tool_result', callId: 'c2', content: 'boom', isError: true },
            ],
          },
          { role: 'user', content: [{ type: 'text', text: 'and?' }] },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'done' },
              { type: 'reasoning', text: '', signature: 'gemini:SIG2' },
            ],
          },
        ],
      },
      'gemini-2.5-flash',
      {
        contents: [
          { role: 'user', parts: [{ text: 'q' }] },
          {
            role: 'model',
            parts: [{ functionCall: { name: 'a', args: { x: 1 } }, thoughtSignature: 'SIG1' }, { functionCall: { name: 'b', args: { _raw: 'not json' } } }],
          },
          {
            role: 'user',
            parts: [
              { functionResponse: { name: 'a', response: { ok: true } } },
              { functionResponse: { name: 'b', response: { error: 'boom' } } },
              { text: 'and?' },
            ],
          },
          { role: 'model', parts: [{ text: 'done', thoughtSignature: 'SIG2' }] },
        ],
        generationConfig: { maxOutputTokens: 100 },
      },
    ],
  ];
  it.each(cases)('%s', (_name, ir, model, want) => {
    expect(encodeGeminiRequest(ir, model, 100)).toEqual(want);
  });

  it("a tool's images follow its functionResponse in the same turn", () => {
    const ir: IrRequest = {
      ...base,
      messages: [
        { role: 'assistant', content: [{ type: 'tool_call', id: 'c1', name: 'shot', arguments: '{}' }] },
        {
          role: 'user',
          content: [{ type: 'tool_result', callId: 'c1', content: 'the screen', images: [{ type: 'image', mediaType: 'image/png', data: 'AAAA' }] }],
        },
      ],
    };
    const body = encodeGeminiRequest(ir, 'gemini-2.5-flash', 10) as { contents: { parts: Record<string, unknown>[] }[] };
    expect(body.contents[1]!.parts).toEqual([
      { functionResponse: { name: 'shot', response: expect.anything() as unknown } },
      { inlineData: { mimeType: 'image/png', data: 'AAAA' } },
    ]);
  });

  it('Gemini 3: the first call of a model turn without a signature gets the documented skip value', () => {
    const ir: IrRequest = {
      ...base,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'q' }] },
        { role: 'assistant', content: [{ type: 'tool_call', id: 'c1', name: 'a', arguments: '{}' }] },
        { role: 'user', content: [{ type: 'tool_result', callId: 'c1', content: 'r' }] },
      ],
    };
    const body = encodeGeminiRequest(ir, 'gemini-3-pro-preview', 10) as { contents: { parts: Record<string, unknown>[] }[] };
    expect(body.contents[1]!.parts[0]).toEqual({ functionCall: { name: 'a', args: {} }, thoughtSignature: 'skip_thought_signature_validator' });
  });
});

describe('answer decoding', () => {
  it('a documented answer with thoughts, a signed function call, usage with cache and thoughts', () => {
    const r = decodeGeminiResponse({
      candidates: [
        {
          content: {
            role: 'model',
            parts: [
              { text: '**Planning**\n\nI should check.', thought: true },
              { functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'CiQB0e2Kb' },
              { functionCall: { name: 'get_time', args: { city: 'Paris' } } },
            ],
          },
          finishReason: 'STOP',
          index: 0,
        },
      ],
      usageMetadata: { promptTokenCount: 120, cachedContentTokenCount: 100, candidatesTokenCount: 20, thoughtsTokenCount: 37, totalTokenCount: 177 },
      modelVersion: 'gemini-2.5-flash',
      responseId: 'resp-1',
    });
    expect(r.id).toBe('resp-1');
    expect(r.finish).toEqual({ reason: 'tool_calls', raw: 'STOP' });
    expect(r.usage).toEqual({ inputTokens: 120, cachedInputTokens: 100, cacheWriteTokens: 0, outputTokens: 57, reasoningTokens: 37 });
    expect(r.content.map((c) => c.type)).toEqual(['reasoning', 'reasoning', 'tool_call', 'tool_call']);
    expect(r.content[1]).toEqual({ type: 'reasoning', text: '', signature: 'gemini:CiQB0e2Kb' });
    expect(r.content[2]).toMatchObject({ type: 'tool_call', name: 'get_weather', arguments: '{"city":"Paris"}' });
  });

  it.each([
    ['MAX_TOKENS', 'length'],
    ['SAFETY', 'content_filter'],
    ['RECITATION', 'content_filter'],
    ['MALFORMED_FUNCTION_CALL', 'error'],
    ['LANGUAGE', 'other'],
  ])('finishReason %s is %s, the raw word kept', (raw, reason) => {
    expect(decodeGeminiResponse({ candidates: [{ content: { parts: [{ text: 'x' }] }, finishReason: raw }] }).finish).toEqual({ reason, raw });
  });

  it('a prompt Gemini blocked (no candidate) is a content_filter stop with the block reason', () => {
    const r = decodeGeminiResponse({ promptFeedback: { blockReason: 'PROHIBITED_CONTENT' }, usageMetadata: { promptTokenCount: 9, totalTokenCount: 9 } });
    expect(r.finish).toEqual({ reason: 'content_filter', raw: 'PROHIBITED_CONTENT' });
    expect(r.usage.inputTokens).toBe(9);
  });
});

describe('stream decoding', () => {
  const run = (events: unknown[]) => {
    const d = new GeminiStreamDecoder();
    const parts: IrStreamPart[] = [];
    for (const e of events) parts.push(...d.event('', JSON.stringify(e)));
    return { d, parts };
  };

  it('thoughts, text, a trailing signature on the last text part (after the text, which stays one block), usage from the finishing chunk', () => {
    const { d, parts } = run([
      {
        candidates: [{ content: { role: 'model', parts: [{ text: 'Thinking', thought: true }] }, index: 0 }],
        usageMetadata: { promptTokenCount: 8 },
        responseId: 'r1',
      },
      { candidates: [{ content: { role: 'model', parts: [{ text: 'Hello' }] }, index: 0 }], usageMetadata: { promptTokenCount: 8 } },
      {
        candidates: [{ content: { role: 'model', parts: [{ text: ' world', thoughtSignature: 'SIG' }] }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 8, candidatesTokenCount: 2, thoughtsTokenCount: 1, totalTokenCount: 11 },
      },
    ]);
    expect(d.done).toBe(true);
    expect(parts).toEqual([
      { type: 'start', id: 'r1' },
      { type: 'reasoning', index: 0, delta: 'Thinking' },
      { type: 'block_end', index: 0 },
      { type: 'text', index: 1, delta: 'Hello' },
      { type: 'text', index: 1, delta: ' world' },
      { type: 'block_end', index: 1 },
      { type: 'reasoning_signature', index: 2, signature: 'gemini:SIG' },
      { type: 'block_end', index: 2 },
      {
        type: 'finish',
        finish: { reason: 'stop', raw: 'STOP' },
        usage: { inputTokens: 8, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 3, reasoningTokens: 1 },
      },
    ]);
  });

  it('parallel calls arrive whole, each its own block; an error event ends the stream', () => {
    const { parts } = run([
      {
        candidates: [
          {
            content: { parts: [{ functionCall: { name: 'a', args: {} }, thoughtSignature: 'S' }, { functionCall: { name: 'b', args: { k: 2 } } }] },
            finishReason: 'STOP',
          },
        ],
        usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 4 },
      },
    ]);
    expect(parts.filter((x) => x.type === 'tool_call_start').map((x) => (x as { name: string }).name)).toEqual(['a', 'b']);
    expect(parts.at(-1)).toMatchObject({ type: 'finish', finish: { reason: 'tool_calls', raw: 'STOP' } });
    const e = run([{ error: { code: 503, message: 'overloaded', status: 'UNAVAILABLE' } }]);
    expect(e.parts).toEqual([{ type: 'error', message: 'overloaded', errorType: 'UNAVAILABLE' }]);
    expect(e.d.done).toBe(true);
  });
});

describe('signatures across providers', () => {
  it("Gemini's signed reasoning is left out for a provider that did not make it; others' untouched", async () => {
    const { withoutGeminiReasoning } = await import('../../proxy/upstreams/gemini/signature.js');
    const ir: IrRequest = {
      ...base,
      messages: [
        {
          role: 'assistant',
          content: [
            { type: 'reasoning', text: '', signature: 'gemini:S' },
            { type: 'reasoning', text: 't', signature: 'claude-sig' },
            { type: 'tool_call', id: 'c', name: 'f', arguments: '{}' },
          ],
        },
      ],
    };
    expect(withoutGeminiReasoning(ir).messages[0]!.content.map((p) => p.type)).toEqual(['reasoning', 'tool_call']);
    expect(withoutGeminiReasoning(base)).toBe(base);
  });
});
