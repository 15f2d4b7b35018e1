import { cachePrefix, planAnswer, type Plan, type ToolSpec } from './chat-plan.js';
import { parseDirectives, sleep } from './directives.js';
import { openaiFailure } from './openai-chat.js';
import { openaiError } from './openai-error.js';
import type { SimRequest, SimRoute } from './server.js';
import { sendJson, SimStream, sseHeaders } from './sim-stream.js';
import { contentText, countInputTokens, simId } from './text.js';

/**
 * OpenAI Responses (POST /v1/responses) as api.openai.com answers it, JSON and SSE with the real
 * event sequence: response.created, response.in_progress, output items added / their parts and
 * deltas / done, response.completed carrying the usage. A reasoning item when `reasoning` is set
 * (with a streamed summary when a summary is asked for), a function_call item with streamed
 * arguments when tool_choice requires a call (or `[sim:tool]`), text otherwise. `[sim:fail]`
 * ends a stream with response.failed.
 */

type Item = { type?: unknown; role?: unknown; content?: unknown };

function items(input: unknown): Item[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  return Array.isArray(input) ? (input as Item[]) : [];
}

function lastUserText(list: Item[]): string {
  for (let i = list.length - 1; i >= 0; i--) {
    const it = list[i]!;
    if (it.role === 'user' && (it.type === undefined || it.type === 'message')) return contentText(it.content);
  }
  return '';
}

function toolsOf(body: Record<string, unknown>): ToolSpec[] {
  if (!Array.isArray(body.tools)) return [];
  return body.tools.flatMap((t: { type?: unknown; name?: unknown; parameters?: unknown }) =>
    t?.type === 'function' && typeof t.name === 'string' ? [{ name: t.name, schema: t.parameters }] : [],
  );
}

function forcedTool(choice: unknown): string | undefined {
  if (choice === 'required') return '*';
  const c = choice as { type?: unknown; name?: unknown } | undefined;
  if (c?.type === 'function' && typeof c.name === 'string') return c.name;
  return undefined;
}

async function responses(r: SimRequest): Promise<void> {
  const body = r.json;
  if (!body || typeof body.model !== 'string') {
    openaiError(r, 400, "Missing required parameter: 'model'.", 'invalid_request_error', 'missing_required_parameter');
    return;
  }
  const list = items(body.input);
  const prompt = lastUserText(list);
  const d = parseDirectives(prompt);
  const stream = body.stream === true;
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted) return;
  if (openaiFailure(r, stream ? { ...d, fail: false } : d)) return;

  const reasoningCfg = body.reasoning as { effort?: unknown; summary?: unknown } | undefined | null;
  const plan = planAnswer({
    prompt,
    directives: d,
    tools: toolsOf(body),
    forced: forcedTool(body.tool_choice),
    afterToolResult: list.at(-1)?.type === 'function_call_output',
    reasoning: !!reasoningCfg && (reasoningCfg.effort != null || reasoningCfg.summary != null),
    parallel: body.parallel_tool_calls !== false,
  });
  const summarize = reasoningCfg?.summary != null;
  const total = countInputTokens(JSON.stringify([body.instructions ?? null, body.input ?? null, body.tools ?? null]));
  // Earlier turns, instructions and tools are the cacheable prefix (the last item is new).
  const prefix = list.length > 1 || body.instructions || body.tools ? JSON.stringify([body.instructions ?? null, list.slice(0, -1), body.tools ?? null]) : '';
  const cache = cachePrefix(r.sim, prefix);
  const cached = cache.hit ? Math.min(cache.tokens, total - 1) : 0;
  const usage = {
    input_tokens: total,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: plan.outputTokens,
    output_tokens_details: { reasoning_tokens: plan.reasoningTokens },
    total_tokens: total + plan.outputTokens,
  };
  const id = simId('resp_sim');
  const createdAt = Math.floor(Date.now() / 1000);
  const encrypted = Array.isArray(body.include) && body.include.includes('reasoning.encrypted_content');
  const response = (status: string, output: unknown[], extra: Record<string, unknown> = {}) => ({
    id,
    object: 'response',
    created_at: createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: reasoningCfg?.effort ?? null, summary: reasoningCfg?.summary ?? null },
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: body.text ?? { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: 'disabled',
    usage: null,
    user: null,
    metadata: body.metadata ?? {},
    ...extra,
  });

  const reasoningId = simId('rs_sim');
  const msgId = simId('msg_sim');
  const fcIds = plan.tools.map(() => simId('fc_sim'));
  const reasoningItem = () => ({
    id: reasoningId,
    type: 'reasoning',
    summary: summarize ? [{ type: 'summary_text', text: plan.reasoning.join('') }] : [],
    ...(encrypted ? { encrypted_content: Buffer.from(`sim:${reasoningId}`).toString('base64') } : {}),
  });
  const textPart = (text: string) => ({ type: 'output_text', text, annotations: [], logprobs: [] });
  const messageItem = (status: string, text?: string) => ({
    id: msgId,
    type: 'message',
    status,
    role: 'assistant',
    content: text === undefined ? [] : [textPart(text)],
  });
  const callItem = (i: number, status: string, args: string) => ({
    id: fcIds[i],
    type: 'function_call',
    status,
    arguments: args,
    call_id: `call_${plan.tools[i]!.id}`,
    name: plan.tools[i]!.name,
  });
  const finalOutput: unknown[] = [];
  if (plan.reasoning.length) finalOutput.push(reasoningItem());
  for (const [i, c] of plan.tools.entries()) finalOutput.push(callItem(i, 'completed', c.arguments));
  if (!plan.tools.length) finalOutput.push(messageItem('completed', plan.text.join('')));

  if (!stream) {
    sendJson(r, 200, response('completed', finalOutput, { usage }), { 'x-request-id': simId('req_') });
    return;
  }

  r.res.writeHead(200, sseHeaders('x-request-id', simId('req_')));
  let seq = 0;
  const ev = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
  const failed = () =>
    ev('response.failed', {
      response: response('failed', [], { error: { code: 'server_error', message: 'The model failed to generate a response (simulated).' } }),
    });
  const out = new SimStream(r, d, Math.max(1, Math.floor(contentEvents(plan) / 2)), failed);
  if (!(await out.send(ev('response.created', { response: response('in_progress', []) })))) return;
  if (!(await out.send(ev('response.in_progress', { response: response('in_progress', []) })))) return;
  let index = 0;
  if (plan.reasoning.length) {
    const item = { ...reasoningItem(), summary: [] };
    if (!(await out.send(ev('response.output_item.added', { output_index: index, item })))) return;
    if (summarize) {
      const base = { item_id: reasoningId, output_index: index, summary_index: 0 };
      if (!(await out.send(ev('response.reasoning_summary_part.added', { ...base, part: { type: 'summary_text', text: '' } })))) return;
      for (const t of plan.reasoning) if (!(await out.send(ev('response.reasoning_summary_text.delta', { ...base, delta: t }), true))) return;
      const text = plan.reasoning.join('');
      if (!(await out.send(ev('response.reasoning_summary_text.done', { ...base, text })))) return;
      if (!(await out.send(ev('response.reasoning_summary_part.done', { ...base, part: { type: 'summary_text', text } })))) return;
    }
    if (!(await out.send(ev('response.output_item.done', { output_index: index, item: reasoningItem() })))) return;
    index++;
  }
  for (const [i, c] of plan.tools.entries()) {
    const item_id = fcIds[i];
    if (!(await out.send(ev('response.output_item.added', { output_index: index, item: callItem(i, 'in_progress', '') })))) return;
    for (const p of c.pieces) if (!(await out.send(ev('response.function_call_arguments.delta', { item_id, output_index: index, delta: p }), true))) return;
    if (!(await out.send(ev('response.function_call_arguments.done', { item_id, output_index: index, name: c.name, arguments: c.arguments })))) return;
    if (!(await out.send(ev('response.output_item.done', { output_index: index, item: callItem(i, 'completed', c.arguments) })))) return;
    index++;
  }
  if (!plan.tools.length) {
    const text = plan.text.join('');
    const base = { item_id: msgId, output_index: index, content_index: 0 };
    if (!(await out.send(ev('response.output_item.added', { output_index: index, item: messageItem('in_progress') })))) return;
    if (!(await out.send(ev('response.content_part.added', { ...base, part: textPart('') })))) return;
    for (const t of plan.text) if (!(await out.send(ev('response.output_text.delta', { ...base, delta: t, logprobs: [] }), true))) return;
    if (!(await out.send(ev('response.output_text.done', { ...base, text, logprobs: [] })))) return;
    if (!(await out.send(ev('response.content_part.done', { ...base, part: textPart(text) })))) return;
    if (!(await out.send(ev('response.output_item.done', { output_index: index, item: messageItem('completed', text) })))) return;
  }
  out.end(ev('response.completed', { response: response('completed', finalOutput, { usage }) }));
}

function contentEvents(plan: Plan): number {
  return plan.reasoning.length + plan.text.length + plan.tools.reduce((n, c) => n + c.pieces.length, 0);
}

export const openaiResponsesRoutes: SimRoute[] = [{ method: 'POST', path: '/v1/responses', handler: responses }];
