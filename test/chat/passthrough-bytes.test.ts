import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { RecordingBilling, rid } from './support.js';

/**
 * Byte fidelity of the passthrough: an upstream that answers fixed bytes, split at awkward
 * places (inside a multi-byte character, between \r and \n, inside `data:`), with comments,
 * CRLF line ends, unknown events and fields. The client must receive exactly those bytes, and
 * the tap must still find the usage in them.
 */
const KEY = 'sk-service-bytes-test';
const billing = new RecordingBilling();

const MESSAGES = [
  'event: message_start\r\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":7,"cache_read_input_tokens":100,"cache_creation_input_tokens":3,"output_tokens":1}}}\r\n\r\n',
  ': keep-alive comment\r\n\r\n',
  'event: content_block_start\r\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\r\n\r\n',
  'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"héllo 🌍 \\"quoted\\""}}\r\n\r\n',
  'event: future_event\r\ndata: {"type":"future_event","x":1}\r\nid: 9\r\n\r\n',
  'event: content_block_stop\r\ndata: {"type":"content_block_stop","index":0}\r\n\r\n',
  'event: message_delta\r\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}\r\n\r\n',
  'event: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n',
].join('');

const CHAT = [
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"ü"},"finish_reason":null}]}\n\n',
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
  'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":5,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}\n\n',
  'data: [DONE]\n\n',
].join('');

const RESPONSES = [
  // No `event:` lines: some compatible servers send the type in the data only.
  'data: {"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","usage":null}}\n\n',
  'data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"ça"}\n\n',
  'data: {"type":"response.completed","sequence_number":2,"response":{"id":"r","status":"completed","usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":29}}}\n\n',
].join('');

/** Splits at every 7th byte, so boundaries fall inside characters, line ends and fields. */
function pieces(text: string): Buffer[] {
  const b = Buffer.from(text);
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += 7) out.push(b.subarray(i, i + 7));
  return out;
}

let upstream: Server;
let stack: Stack;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = req.url!.startsWith('/v1/messages') ? MESSAGES : req.url!.endsWith('/responses') ? RESPONSES : CHAT;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-upstream-extra': 'kept' });
      const parts = pieces(body);
      let i = 0;
      const next = () => {
        if (i === parts.length) return res.end();
        res.write(parts[i++]);
        setImmediate(next);
      };
      next();
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  stack = await startStack(
    () => [
      chatRoute('fixed-claude', url, { backend: { provider: 'anthropic' } }),
      chatRoute('fixed-gpt', `${url}/v1`),
      group('g', ['fixed-claude', 'fixed-gpt']),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
});
afterAll(async () => {
  await stack.close();
  await new Promise<void>((r) => upstream.close(() => r()));
});

async function post(path: string, body: object, id: string) {
  const r = await request(`${stack.gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ ...body, stream: true }),
  });
  return { status: r.statusCode, headers: r.headers, bytes: Buffer.from(await r.body.arrayBuffer()) };
}

describe('passthrough streams are relayed byte for byte while the tap reads usage', () => {
  it('Anthropic Messages (CRLF, comments, unknown events, split characters)', async () => {
    const id = rid('b-msg');
    const r = await post('/v1/messages', { model: 'fixed-claude', max_tokens: 10, messages: [] }, id);
    expect(r.status).toBe(200);
    expect(r.headers['x-upstream-extra']).toBe('kept');
    expect(r.bytes.equals(Buffer.from(MESSAGES))).toBe(true);
    expect(billing.settled(id)).toMatchObject({ status: 'ok', usageSource: 'reported', usage: { inputTokens: 110, cachedInputTokens: 100, cacheWriteTokens: 3, outputTokens: 42 } });
  });

  it('OpenAI Chat Completions (usage chunk, [DONE])', async () => {
    const id = rid('b-chat');
    const r = await post('/v1/chat/completions', { model: 'fixed-gpt', messages: [] }, id);
    expect(r.bytes.equals(Buffer.from(CHAT))).toBe(true);
    expect(billing.settled(id)).toMatchObject({ usageSource: 'reported', usage: { inputTokens: 11, cachedInputTokens: 4, outputTokens: 5, reasoningTokens: 2 } });
  });

  it('OpenAI Responses (types in the data only)', async () => {
    const id = rid('b-resp');
    const r = await post('/v1/responses', { model: 'fixed-gpt', input: 'x' }, id);
    expect(r.bytes.equals(Buffer.from(RESPONSES))).toBe(true);
    expect(billing.settled(id)).toMatchObject({ usageSource: 'reported', usage: { inputTokens: 20, cachedInputTokens: 8, outputTokens: 9, reasoningTokens: 3 } });
  });
});
