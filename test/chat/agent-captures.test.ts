import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ChatProtocol } from '../../proxy/ir/protocol.js';
import { clientCodec } from '../../proxy/protocols/index.js';
import { encodeMessagesRequest } from '../../proxy/upstreams/anthropic/messages-codec.js';
import { encodeConverseRequest } from '../../proxy/upstreams/bedrock/request.js';
import { encodeChatRequest } from '../../proxy/upstreams/openai/chat-codec.js';
import { encodeResponsesRequest } from '../../proxy/upstreams/openai/responses-codec.js';

/**
 * Real agent requests (captured on loopback from Claude Code 2.1.197 and Codex CLI 0.169.0,
 * test/fixtures/agents/) decoded by the client codec and encoded for every backend protocol they
 * do not speak: what each backend would receive, checked against what the agent asked.
 */
interface Capture {
  name: string;
  client: string;
  path: string;
  body: Record<string, unknown>;
}
const DIR = new URL('../fixtures/agents/', import.meta.url);
const captures: Capture[] = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => ({ name: f.replace(/\.json$/, ''), ...(JSON.parse(readFileSync(new URL(f, DIR), 'utf8')) as Omit<Capture, 'name'>) }));
const protocolOf = (c: Capture): ChatProtocol => (c.path.startsWith('/v1/messages') ? 'messages' : 'responses');
const decode = (c: Capture) => clientCodec(protocolOf(c)).decode(c.body);

type Msg = { role: string; content: unknown; tool_calls?: { id: string; function: { name: string } }[]; tool_call_id?: string };
type Item = { type?: string; role?: string; call_id?: string; name?: string };
type Block = { type: string; id?: string; tool_use_id?: string };

describe('the captures', () => {
  it('hold both agents, a first turn and a turn with a tool result each', () => {
    expect(captures.map((c) => c.name)).toEqual([
      'claude-code-2.1.197-first-turn',
      'claude-code-2.1.197-tool-result',
      'codex-0.169.0-first-turn',
      'codex-0.169.0-tool-result',
    ]);
  });
});

describe.each(captures.filter((c) => c.client.startsWith('Claude Code')))('Claude Code: $name', (c) => {
  const body = c.body as { system: unknown[]; messages: { role: string; content: unknown }[]; tools: { name: string; input_schema: unknown }[] };
  const d = decode(c);
  const systemTurns = body.messages.filter((m) => m.role === 'system').length;

  it('is served translated: nothing refused; the Anthropic-only hints dropped and named', () => {
    expect(d.fates.filter((f) => f.fate === 'refused')).toEqual([]);
    expect(d.fates.map((f) => f.field).sort()).toEqual(['cache_control', 'context_management']);
    // The mid-conversation system message joined the instructions, after the system blocks.
    expect(systemTurns).toBeGreaterThan(0);
    expect(d.ir.system).toHaveLength(body.system.length + systemTurns);
    expect(d.ir.messages.every((m) => m.role === 'user' || m.role === 'assistant')).toBe(true);
    // thinking: adaptive with output_config.effort high is reasoning effort high.
    expect(d.ir.reasoning).toEqual({ effort: 'high' });
  });

  it('towards Chat Completions: every tool with its schema, the instructions as system messages, the result answering its call', () => {
    const up = encodeChatRequest({ ...d.ir, maxOutputTokens: 32000 }, 'gpt-x', { openaiItself: true }) as {
      messages: Msg[];
      tools: { function: { name: string; parameters: unknown } }[];
    };
    expect(up.tools.map((t) => t.function.name)).toEqual(body.tools.map((t) => t.name));
    expect(up.tools.map((t) => t.function.parameters)).toEqual(body.tools.map((t) => t.input_schema));
    expect(up.messages.slice(0, d.ir.system.length).every((m) => m.role === 'system')).toBe(true);
    expect(up).toMatchObject({ max_completion_tokens: 32000, reasoning_effort: 'high' });
    expect(JSON.stringify(up)).not.toContain('cache_control');
    const calls = up.messages.flatMap((m) => m.tool_calls ?? []).map((t) => t.id);
    expect(up.messages.flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : []))).toEqual(calls);
  });

  it('towards Bedrock and Anthropic wires: its cache breakpoints travel (cache points after the same blocks, cache_control back as it was)', () => {
    const all = JSON.stringify(c.body).split('"cache_control"').length - 1;
    // The instructions become one block: their breakpoints, one.
    const inSystem = (body.system as { cache_control?: unknown }[]).filter((b) => b.cache_control).length;
    const marks = all - Math.max(0, inSystem - 1);
    expect(marks).toBeGreaterThan(0);
    const converse = encodeConverseRequest(d.ir, 'anthropic.claude-x', 32000);
    expect(JSON.stringify(converse).split('"cachePoint"').length - 1).toBe(marks);
    const messages = encodeMessagesRequest(d.ir, 'claude-x', 32000);
    expect(JSON.stringify(messages).split('"cache_control"').length - 1).toBe(marks);
  });

  it('towards Responses: instructions, tools, and the result as a function_call_output of its call', () => {
    const up = encodeResponsesRequest(d.ir, 'gpt-x', 32000) as { instructions: string; input: Item[]; tools: { name: string }[]; reasoning: unknown };
    expect(up.instructions.split('\n\n').length).toBeGreaterThanOrEqual(d.ir.system.length);
    expect(up.tools.map((t) => t.name)).toEqual(body.tools.map((t) => t.name));
    expect(up.reasoning).toEqual({ effort: 'high', summary: 'auto' });
    const calls = up.input.filter((i) => i.type === 'function_call').map((i) => i.call_id);
    expect(up.input.filter((i) => i.type === 'function_call_output').map((i) => i.call_id)).toEqual(calls);
  });
});

describe.each(captures.filter((c) => c.client.startsWith('Codex')))('Codex: $name', (c) => {
  const body = c.body as { input: Item[]; tools: { type: string; name?: string; tools?: { name: string }[] }[] };
  const d = decode(c);
  // Namespace tools are flattened; hosted ones (web_search) are not offered by other providers.
  const functions = body.tools.flatMap((t) => (t.type === 'function' ? [t.name!] : t.type === 'namespace' ? t.tools!.map((x) => x.name) : []));

  it('is served translated: nothing refused; OpenAI-side extras and the hosted web_search dropped and named', () => {
    expect(d.fates.filter((f) => f.fate === 'refused')).toEqual([]);
    expect(d.fates.map((f) => f.field).sort()).toEqual(['client_metadata', 'include', 'prompt_cache_key', 'tools[web_search]']);
    expect(d.ir.tools.map((t) => t.name)).toEqual(functions);
    expect(d.ir.system).toHaveLength(body.input.filter((i) => i.role === 'developer').length);
    expect(d.ir.parallelToolCalls).toBe(true);
  });

  it('towards Messages: developer items as system, turns alternating, each tool_result answering its tool_use', () => {
    const up = encodeMessagesRequest(d.ir, 'claude-x', 8192) as { system: string; messages: { role: string; content: Block[] }[]; tools: { name: string }[] };
    expect(up.system.length).toBeGreaterThan(0);
    expect(up.tools.map((t) => t.name)).toEqual(functions);
    const roles = up.messages.map((m) => m.role);
    expect(roles.every((r, i) => i === 0 || r !== roles[i - 1])).toBe(true);
    expect(roles[0]).toBe('user');
    const uses = up.messages.flatMap((m) => m.content.filter((b) => b.type === 'tool_use').map((b) => b.id));
    const results = up.messages.flatMap((m) => m.content.filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id));
    expect(results).toEqual(uses);
    expect(uses).toEqual(body.input.filter((i) => i.type === 'function_call').map((i) => i.call_id));
  });

  it('towards Chat Completions: system messages, the call and its tool message, parallel calls allowed', () => {
    const up = encodeChatRequest({ ...d.ir, maxOutputTokens: 8192 }, 'gpt-x', { openaiItself: false }) as {
      messages: Msg[];
      parallel_tool_calls: boolean;
      max_tokens: number;
    };
    expect(up).toMatchObject({ parallel_tool_calls: true, max_tokens: 8192 });
    const calls = up.messages.flatMap((m) => m.tool_calls ?? []).map((t) => t.id);
    expect(up.messages.flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : []))).toEqual(calls);
    expect(calls).toEqual(body.input.filter((i) => i.type === 'function_call').map((i) => i.call_id));
  });
});
