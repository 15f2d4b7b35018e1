import { describe, expect, it } from 'vitest';
import type { IrRequest, IrStreamPart } from '../../proxy/ir/chat.js';
import { encodeConverseRequest } from '../../proxy/upstreams/bedrock/request.js';
import { ConverseStreamDecoder, decodeConverseResponse } from '../../proxy/upstreams/bedrock/response.js';
import { eventMessage } from '../../simulator/bedrock-converse.js';

/**
 * The Bedrock codec's table: IR requests and the Converse bodies they become; answers and event
 * streams in the shapes AWS documents (docs.aws.amazon.com/bedrock/latest/APIReference,
 * Converse / ConverseStream) and the IR they give, the stream fed in arbitrary byte pieces.
 */
const base: IrRequest = { system: [], messages: [], tools: [], stream: false };

describe('request encoding', () => {
  it('a tool loop with Claude thinking: reasoning with its signature, toolUse, toolResult (error status), toolConfig, inferenceConfig', () => {
    const ir: IrRequest = {
      ...base,
      system: ['Be brief.'],
      stop: ['END'],
      temperature: 0.7,
      reasoning: { budgetTokens: 2048 },
      tools: [{ name: 'f', description: 'd', parameters: { type: 'object' } }],
      toolChoice: { type: 'required' },
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'q' },
            { type: 'image', data: 'AAAA', mediaType: 'image/png' },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'reasoning', text: 'hmm', signature: 'SIG' },
            { type: 'reasoning', text: 'gemini thought', signature: 'gemini:X' },
            { type: 'redacted_reasoning', data: 'RED' },
            { type: 'tool_call', id: 't1', name: 'f', arguments: '{"a":1}' },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', callId: 't1', content: 'bad', isError: true }] },
      ],
    };
    expect(encodeConverseRequest(ir, 'anthropic.claude-sonnet-4-20250514-v1:0', 4096)).toEqual({
      messages: [
        { role: 'user', content: [{ text: 'q' }, { image: { format: 'png', source: { bytes: 'AAAA' } } }] },
        {
          role: 'assistant',
          content: [
            { reasoningContent: { reasoningText: { text: 'hmm', signature: 'SIG' } } },
            { reasoningContent: { redactedContent: 'RED' } },
            { toolUse: { toolUseId: 't1', name: 'f', input: { a: 1 } } },
          ],
        },
        { role: 'user', content: [{ toolResult: { toolUseId: 't1', content: [{ text: 'bad' }], status: 'error' } }] },
      ],
      system: [{ text: 'Be brief.' }],
      inferenceConfig: { maxTokens: 4096, stopSequences: ['END'] },
      toolConfig: { tools: [{ toolSpec: { name: 'f', description: 'd', inputSchema: { json: { type: 'object' } } } }], toolChoice: { any: {} } },
      additionalModelRequestFields: { thinking: { type: 'enabled', budget_tokens: 2048 } },
    });
  });

  it("a tool's images go inside its toolResult, as Converse takes them", () => {
    const ir: IrRequest = {
      ...base,
      messages: [
        { role: 'assistant', content: [{ type: 'tool_call', id: 't1', name: 'shot', arguments: '{}' }] },
        {
          role: 'user',
          content: [{ type: 'tool_result', callId: 't1', content: 'the screen', images: [{ type: 'image', mediaType: 'image/png', data: 'AAAA' }] }],
        },
      ],
    };
    const body = encodeConverseRequest(ir, 'anthropic.claude-sonnet-4-20250514-v1:0', 100) as { messages: { content: unknown[] }[] };
    expect(body.messages[1]!.content).toEqual([
      { toolResult: { toolUseId: 't1', content: [{ text: 'the screen' }, { image: { format: 'png', source: { bytes: 'AAAA' } } }] } },
    ]);
    // An image alone (a file read): no blank text block, which Converse refuses.
    const alone = encodeConverseRequest(
      {
        ...ir,
        messages: [
          ir.messages[0]!,
          { role: 'user', content: [{ type: 'tool_result', callId: 't1', content: '', images: [{ type: 'image', mediaType: 'image/png', data: 'AAAA' }] }] },
        ],
      },
      'anthropic.claude-sonnet-4-20250514-v1:0',
      100,
    ) as { messages: { content: unknown[] }[] };
    expect(alone.messages[1]!.content).toEqual([{ toolResult: { toolUseId: 't1', content: [{ image: { format: 'png', source: { bytes: 'AAAA' } } }] } }]);
  });

  it('a model other than Claude gets no thinking fields; sampling kept', () => {
    const body = encodeConverseRequest(
      { ...base, temperature: 0.2, reasoning: { effort: 'high' }, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] },
      'meta.llama3-70b-instruct-v1:0',
      100,
    );
    expect(body).toEqual({ messages: [{ role: 'user', content: [{ text: 'x' }] }], inferenceConfig: { maxTokens: 100, temperature: 0.2 } });
  });
});

describe('answer decoding', () => {
  it('a documented Converse answer with reasoning, a tool call and cache usage', () => {
    const r = decodeConverseResponse({
      output: {
        message: {
          role: 'assistant',
          content: [
            { reasoningContent: { reasoningText: { text: 'think', signature: 'S1' } } },
            { text: 'Let me check.' },
            { toolUse: { toolUseId: 'tooluse_1', name: 'f', input: { a: 1 } } },
          ],
        },
      },
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 20, totalTokens: 330, cacheReadInputTokens: 200, cacheWriteInputTokens: 100 },
      metrics: { latencyMs: 100 },
    });
    expect(r.content).toEqual([
      { type: 'reasoning', text: 'think', signature: 'S1' },
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_call', id: 'tooluse_1', name: 'f', arguments: '{"a":1}' },
    ]);
    expect(r.finish).toEqual({ reason: 'tool_calls', raw: 'tool_use' });
    expect(r.usage).toEqual({ inputTokens: 310, cachedInputTokens: 200, cacheWriteTokens: 100, outputTokens: 20, reasoningTokens: 0 });
  });

  it.each([
    ['guardrail_intervened', 'content_filter'],
    ['max_tokens', 'length'],
    ['stop_sequence', 'stop'],
    ['something_new', 'other'],
  ])('stopReason %s is %s', (raw, reason) => {
    expect(decodeConverseResponse({ stopReason: raw }).finish).toEqual({ reason, raw });
  });
});

describe('event stream decoding', () => {
  const frames = Buffer.concat([
    eventMessage('messageStart', { role: 'assistant' }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { text: 'hm' } } }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { signature: 'SIG' } } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 0 }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 1, delta: { text: 'Hi' } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 1 }),
    eventMessage('contentBlockStart', { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tu1', name: 'f' } } }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '{"a":' } } }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '1}' } } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 2 }),
    eventMessage('messageStop', { stopReason: 'tool_use' }),
    eventMessage('metadata', { usage: { inputTokens: 5, outputTokens: 7, cacheReadInputTokens: 3 }, metrics: { latencyMs: 1 } }),
  ]);

  it.each([1, 7, 64, frames.length])('read in %i-byte pieces: the same parts, the finish with usage after metadata', (size) => {
    const d = new ConverseStreamDecoder();
    const parts: IrStreamPart[] = [];
    for (let i = 0; i < frames.length; i += size) parts.push(...d.bytes(frames.subarray(i, i + size)));
    expect(parts.slice(1)).toEqual([
      { type: 'reasoning', index: 0, delta: 'hm' },
      { type: 'reasoning_signature', index: 0, signature: 'SIG' },
      { type: 'block_end', index: 0 },
      { type: 'text', index: 1, delta: 'Hi' },
      { type: 'block_end', index: 1 },
      { type: 'tool_call_start', index: 2, id: 'tu1', name: 'f' },
      { type: 'tool_call_delta', index: 2, arguments: '{"a":' },
      { type: 'tool_call_delta', index: 2, arguments: '1}' },
      { type: 'block_end', index: 2 },
      {
        type: 'finish',
        finish: { reason: 'tool_calls', raw: 'tool_use' },
        usage: { inputTokens: 8, cachedInputTokens: 3, cacheWriteTokens: 0, outputTokens: 7, reasoningTokens: 0 },
      },
    ]);
    expect(parts[0]!.type).toBe('start');
    expect(d.done).toBe(true);
  });

  it('an exception message ends the stream with an error; a corrupted frame throws (its checksum)', () => {
    const d = new ConverseStreamDecoder();
    const parts = d.bytes(
      Buffer.concat([eventMessage('messageStart', { role: 'assistant' }), eventMessage('throttlingException', { message: 'slow down' }, 'exception')]),
    );
    expect(parts.at(-1)).toEqual({ type: 'error', message: 'slow down', errorType: 'throttlingException' });
    const bad = eventMessage('messageStart', { role: 'assistant' });
    bad.writeUInt8(bad.readUInt8(bad.length - 6) ^ 0xff, bad.length - 6);
    expect(() => new ConverseStreamDecoder().bytes(bad)).toThrow();
  });
});
