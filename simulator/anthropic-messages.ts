import { cachePrefix, planAnswer, type Plan, type ToolSpec } from './chat-plan.js';
import { parseDirectives, sleep, type Directives } from './directives.js';
import type { SimRequest, SimRoute } from './server.js';
import { sendJson, SimStream, sseHeaders } from './sim-stream.js';
import { contentText, countInputTokens, simId } from './text.js';

/**
 * Anthropic Messages as api.anthropic.com answers it: POST /v1/messages (JSON and SSE, query
 * strings such as ?beta=true accepted) and POST /v1/messages/count_tokens. Thinking blocks when
 * `thinking` is enabled, tool_use blocks with streamed input_json_delta when tool_choice requires
 * a tool (or `[sim:tool]`), usage with cache reads and writes when blocks carry cache_control,
 * and `role: "system"` entries inside `messages` accepted (Claude Code sends them).
 */

export function anthropicError(r: SimRequest, status: number, type: string, message: string, headers: Record<string, string> = {}): void {
  sendJson(r, status, { type: 'error', error: { type, message }, request_id: simId('req_') }, { 'request-id': simId('req_'), ...headers });
}

function failure(r: SimRequest, d: Directives, stream: boolean): boolean {
  if (d.status === 429)
    anthropicError(r, 429, 'rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit (simulated).', { 'retry-after': '7' });
  else if (d.status === 500 || (d.fail && !stream)) anthropicError(r, 500, 'api_error', 'Internal server error (simulated).');
  else return false;
  return true;
}

type Msg = { role?: unknown; content?: unknown };

function lastUser(messages: Msg[]): Msg | undefined {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === 'user') return messages[i];
  return undefined;
}

function hasBlock(content: unknown, type: string): boolean {
  return Array.isArray(content) && content.some((b) => (b as { type?: unknown } | null)?.type === type);
}

/** Validates the request; answers 400 in Anthropic's shape and returns undefined when it is not one. */
function validate(r: SimRequest, countOnly: boolean): { body: Record<string, unknown>; messages: Msg[] } | undefined {
  if (!r.req.headers['anthropic-version']) {
    anthropicError(r, 400, 'invalid_request_error', 'anthropic-version: header is required');
    return undefined;
  }
  const body = r.json;
  if (!body) {
    anthropicError(r, 400, 'invalid_request_error', 'The request body is not valid JSON.');
    return undefined;
  }
  if (typeof body.model !== 'string') {
    anthropicError(r, 400, 'invalid_request_error', 'model: Field required');
    return undefined;
  }
  if (!Array.isArray(body.messages)) {
    anthropicError(r, 400, 'invalid_request_error', 'messages: Field required');
    return undefined;
  }
  if (!countOnly && (typeof body.max_tokens !== 'number' || body.max_tokens < 1)) {
    anthropicError(r, 400, 'invalid_request_error', 'max_tokens: Field required');
    return undefined;
  }
  return { body, messages: body.messages as Msg[] };
}

/** Every input token: system, messages and tools (count_tokens reports the same figure). */
function inputTokens(body: Record<string, unknown>): number {
  return countInputTokens(JSON.stringify([body.system ?? null, body.messages, body.tools ?? null]));
}

function toolsOf(body: Record<string, unknown>): ToolSpec[] {
  if (!Array.isArray(body.tools)) return [];
  return body.tools.flatMap((t: { name?: unknown; input_schema?: unknown }) => (typeof t?.name === 'string' ? [{ name: t.name, schema: t.input_schema }] : []));
}

function forcedTool(choice: unknown): string | undefined {
  const c = choice as { type?: unknown; name?: unknown } | undefined;
  if (c?.type === 'any') return '*';
  if (c?.type === 'tool' && typeof c.name === 'string') return c.name;
  return undefined;
}

async function messages(r: SimRequest): Promise<void> {
  const v = validate(r, false);
  if (!v) return;
  const { body } = v;
  const user = lastUser(v.messages);
  const prompt = contentText(user?.content);
  const d = parseDirectives(prompt);
  const stream = body.stream === true;
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted || failure(r, d, stream)) return;

  const thinking = (body.thinking as { type?: unknown } | undefined)?.type;
  const tools = toolsOf(body);
  const plan = planAnswer({
    prompt,
    directives: d,
    tools,
    forced: (body.tool_choice as { type?: unknown } | undefined)?.type === 'none' ? undefined : forcedTool(body.tool_choice),
    afterToolResult: hasBlock(user?.content, 'tool_result'),
    reasoning: thinking === 'enabled' || thinking === 'adaptive',
    parallel: (body.tool_choice as { disable_parallel_tool_use?: unknown } | undefined)?.disable_parallel_tool_use !== true,
  });
  // max_tokens cuts the text (probe calls send max_tokens: 1).
  const maxTokens = body.max_tokens as number;
  let stopReason = plan.tools.length ? 'tool_use' : 'end_turn';
  if (!plan.tools.length && plan.text.length + plan.reasoning.length > maxTokens) {
    plan.text = plan.text.slice(0, Math.max(0, maxTokens - plan.reasoning.length));
    plan.outputTokens = plan.text.length + plan.reasoning.length;
    stopReason = 'max_tokens';
  }
  if (d.refusal) stopReason = 'refusal';
  const total = inputTokens(body);
  let read = 0;
  let write = 0;
  if (r.body.includes('"cache_control"')) {
    const c = cachePrefix(r.sim, JSON.stringify([body.system ?? null, body.tools ?? null]));
    const tokens = Math.min(c.tokens, total - 1);
    if (c.hit) read = tokens;
    else write = tokens;
  }
  const usage = {
    input_tokens: total - read - write,
    cache_creation_input_tokens: write,
    cache_read_input_tokens: read,
    output_tokens: plan.outputTokens,
    service_tier: 'standard',
  };
  const id = simId('msg_sim');
  const model = body.model as string;
  const signature = Buffer.from(`sim:${id}`).toString('base64');

  if (!stream) {
    const content: unknown[] = [];
    if (plan.reasoning.length) content.push({ type: 'thinking', thinking: plan.reasoning.join(''), signature });
    for (const c of plan.tools) content.push({ type: 'tool_use', id: `toolu_${c.id}`, name: c.name, input: JSON.parse(c.arguments) as unknown });
    if (!plan.tools.length) content.push({ type: 'text', text: plan.text.join('') });
    sendJson(
      r,
      200,
      { id, type: 'message', role: 'assistant', model, content, stop_reason: stopReason, stop_sequence: null, usage },
      { 'request-id': simId('req_') },
    );
    return;
  }

  r.res.writeHead(200, sseHeaders('request-id', simId('req_')));
  const ev = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const error = ev('error', { error: { type: 'overloaded_error', message: 'Overloaded (simulated)' } });
  const out = new SimStream(r, d, Math.max(1, Math.floor(contentEvents(plan) / 2)), error);
  const startUsage = { ...usage, output_tokens: 1 };
  if (
    !(await out.send(
      ev('message_start', {
        message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: startUsage },
      }),
    ))
  )
    return;
  let index = 0;
  let pinged = false;
  const block = async (start: Record<string, unknown>, deltas: Record<string, unknown>[]): Promise<boolean> => {
    if (!(await out.send(ev('content_block_start', { index, content_block: start })))) return false;
    if (!pinged) {
      pinged = true;
      if (!(await out.send(ev('ping', {})))) return false;
    }
    for (const delta of deltas) if (!(await out.send(ev('content_block_delta', { index, delta }), true))) return false;
    if (!(await out.send(ev('content_block_stop', { index })))) return false;
    index++;
    return true;
  };
  if (plan.reasoning.length) {
    const deltas: Record<string, unknown>[] = plan.reasoning.map((t) => ({ type: 'thinking_delta', thinking: t }));
    deltas.push({ type: 'signature_delta', signature });
    if (!(await block({ type: 'thinking', thinking: '', signature: '' }, deltas))) return;
  }
  for (const c of plan.tools) {
    const deltas = c.pieces.map((p) => ({ type: 'input_json_delta', partial_json: p }));
    if (!(await block({ type: 'tool_use', id: `toolu_${c.id}`, name: c.name, input: {} }, deltas))) return;
  }
  const words = plan.text.map((t) => ({ type: 'text_delta', text: t }));
  if (!plan.tools.length && !(await block({ type: 'text', text: '' }, words))) return;
  if (!(await out.send(ev('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: plan.outputTokens } })))) return;
  out.end(ev('message_stop', {}));
}

function contentEvents(plan: Plan): number {
  return plan.reasoning.length + plan.text.length + plan.tools.reduce((n, c) => n + c.pieces.length, 0);
}

function countTokens(r: SimRequest): void {
  const v = validate(r, true);
  if (!v) return;
  sendJson(r, 200, { input_tokens: inputTokens(v.body) }, { 'request-id': simId('req_') });
}

export const anthropicMessagesRoutes: SimRoute[] = [
  { method: 'POST', path: '/v1/messages', handler: messages },
  { method: 'POST', path: '/v1/messages/count_tokens', handler: countTokens },
];
