import { describe, expect, it } from 'vitest';
import { PROTOCOLS } from '../../proxy/protocols/index.js';

/**
 * Feeds (event, data) pairs to a fresh tap of the protocol. Each event is also given alone to a
 * fresh tap: the relay holds back from where `ends` says the stream ends, and reads the events
 * (`event`) only after they were sent, so the two must agree on every event.
 */
function tap(protocol: keyof typeof PROTOCOLS, events: [string, unknown][]) {
  const t = PROTOCOLS[protocol].createTap();
  for (const [e, d] of events) {
    const data = typeof d === 'string' ? d : JSON.stringify(d);
    const alone = PROTOCOLS[protocol].createTap();
    alone.event(e, data);
    expect(t.ends(e, data), `ends(${e}, ${data})`).toBe(alone.terminal);
    t.event(e, data);
  }
  return t;
}

describe('usage taps', () => {
  it('messages: message_start gives input and cache figures, message_delta the final output', () => {
    const start: [string, unknown] = [
      'message_start',
      { type: 'message_start', message: { usage: { input_tokens: 5, cache_read_input_tokens: 50, cache_creation_input_tokens: 7, output_tokens: 1 } } },
    ];
    const partial = tap('messages', [start, ['content_block_delta', { type: 'content_block_delta', delta: { type: 'text_delta', text: 'abcdefgh' } }]]);
    expect(partial).toMatchObject({ final: false, terminal: false, failed: false, textBytes: 8 });
    expect(partial.usage).toEqual({ inputTokens: 62, cachedInputTokens: 50, cacheWriteTokens: 7, outputTokens: 1, reasoningTokens: 0 });
    const done = tap('messages', [
      start,
      ['message_delta', { type: 'message_delta', usage: { output_tokens: 30 } }],
      ['message_stop', { type: 'message_stop' }],
    ]);
    expect(done).toMatchObject({ final: true, terminal: true, failed: false });
    expect(done.usage).toEqual({ inputTokens: 62, cachedInputTokens: 50, cacheWriteTokens: 7, outputTokens: 30, reasoningTokens: 0 });
    expect(tap('messages', [start, ['error', { type: 'error', error: { type: 'overloaded_error', message: 'x' } }]])).toMatchObject({
      terminal: true,
      failed: true,
      final: false,
    });
  });

  it('chat completions: the usage chunk is final, [DONE] terminal, an error frame a failure', () => {
    const t = tap('chat-completions', [
      ['', { choices: [{ delta: { content: 'hey' } }] }],
      [
        '',
        {
          choices: [],
          usage: { prompt_tokens: 9, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 3 }, completion_tokens_details: { reasoning_tokens: 1 } },
        },
      ],
      ['', '[DONE]'],
    ]);
    expect(t).toMatchObject({ final: true, terminal: true, failed: false, textBytes: 3 });
    expect(t.usage).toEqual({ inputTokens: 9, cachedInputTokens: 3, cacheWriteTokens: 0, outputTokens: 4, reasoningTokens: 1 });
    // A content string that merely mentions usage or error is not mistaken for them.
    const quoted = tap('chat-completions', [['', { choices: [{ delta: { content: '{"usage":{"prompt_tokens":1},"error":{}}' } }] }]]);
    expect(quoted).toMatchObject({ usage: null, terminal: false, failed: false });
    expect(tap('chat-completions', [['', { error: { message: 'boom', type: 'server_error' } }]])).toMatchObject({ terminal: true, failed: true });
    // An error frame as some servers space it, or split over data: lines (joined by a line feed).
    expect(tap('chat-completions', [['', '{ \t"error": {"message": "boom"}}']])).toMatchObject({ terminal: true, failed: true });
    expect(tap('chat-completions', [['', '{\n"error": {"message": "boom"}}']])).toMatchObject({ terminal: true, failed: true });
    // A [DONE] after an error frame does not make the stream a success.
    expect(
      tap('chat-completions', [
        ['', { error: { message: 'boom' } }],
        ['', '[DONE]'],
      ]),
    ).toMatchObject({ terminal: true, failed: true });
    // A chunk whose first member is an empty error, or that only names one later, goes on.
    expect(tap('chat-completions', [['', '{"error": null, "choices": []}']])).toMatchObject({ terminal: false, failed: false });
    expect(tap('chat-completions', [['', '{"id": "x", "error": {"message": "boom"}}']])).toMatchObject({ terminal: false, failed: false });
  });

  it('responses: response.completed is final; response.failed and error end it as failures', () => {
    const usage = { input_tokens: 12, input_tokens_details: { cached_tokens: 2 }, output_tokens: 6, output_tokens_details: { reasoning_tokens: 4 } };
    const t = tap('responses', [
      ['response.output_text.delta', { type: 'response.output_text.delta', delta: 'abc' }],
      ['response.completed', { type: 'response.completed', response: { usage } }],
    ]);
    expect(t).toMatchObject({ final: true, terminal: true, failed: false, textBytes: 3 });
    expect(t.usage).toEqual({ inputTokens: 12, cachedInputTokens: 2, cacheWriteTokens: 0, outputTokens: 6, reasoningTokens: 4 });
    expect(tap('responses', [['response.failed', { type: 'response.failed', response: { usage: null } }]])).toMatchObject({
      terminal: true,
      failed: true,
      final: false,
    });
    expect(tap('responses', [['', { type: 'error', message: 'x' }]])).toMatchObject({ terminal: true, failed: true });
    // An error event stays a failure whatever terminal event follows it.
    expect(
      tap('responses', [
        ['error', { type: 'error', message: 'x' }],
        ['response.completed', { type: 'response.completed', response: { usage } }],
      ]),
    ).toMatchObject({ terminal: true, failed: true });
  });
});
