import { cachePrefix, planAnswer, type ToolSpec } from './chat-plan.js';
import { parseDirectives, sleep, type Directives } from './directives.js';
import { openaiError } from './openai-error.js';
import type { SimRequest, SimRoute } from './server.js';
import { SimStream } from './sim-stream.js';
import { contentText, countInputTokens, simId } from './text.js';

/**
 * OpenAI Chat Completions (POST /v1/chat/completions), JSON and SSE, as api.openai.com answers:
 * a role chunk, one chunk per word (or tool_calls chunks with streamed arguments when
 * tool_choice requires a call, or `[sim:tool]` / `[sim:tool=N]` for N parallel calls), a finish chunk, and with
 * stream_options.include_usage a final chunk with empty choices and the usage, then
 * `data: [DONE]`. `[sim:fail]` ends a stream with an error frame.
 */

/** 429/500 directives in the OpenAI error shape; true when the request was answered. */
export function openaiFailure(r: SimRequest, d: Directives): boolean {
  if (d.status === 429) {
    openaiError(r, 429, 'Rate limit reached for requests (simulated).', 'requests', 'rate_limit_exceeded', null, { 'retry-after': '7' });
    return true;
  }
  if (d.status === 500 || d.fail) {
    openaiError(r, 500, 'The server had an error while processing your request (simulated).', 'server_error', null);
    return true;
  }
  return false;
}

type Msg = { role?: unknown; content?: unknown };

function lastUserText(messages: Msg[]): string {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === 'user') return contentText(messages[i]!.content);
  return '';
}

function toolsOf(body: Record<string, unknown>): ToolSpec[] {
  if (!Array.isArray(body.tools)) return [];
  return body.tools.flatMap((t: { type?: unknown; function?: { name?: unknown; parameters?: unknown } }) =>
    t?.type === 'function' && typeof t.function?.name === 'string' ? [{ name: t.function.name, schema: t.function.parameters }] : [],
  );
}

function forcedTool(choice: unknown): string | undefined {
  if (choice === 'required') return '*';
  const c = choice as { type?: unknown; function?: { name?: unknown } } | undefined;
  if (c?.type === 'function' && typeof c.function?.name === 'string') return c.function.name;
  return undefined;
}

async function chatCompletions(r: SimRequest): Promise<void> {
  const body = r.json;
  if (!body || typeof body.model !== 'string' || !Array.isArray(body.messages)) {
    openaiError(r, 400, "Invalid request: 'model' and 'messages' are required.", 'invalid_request_error', null);
    return;
  }
  const messages = body.messages as Msg[];
  const prompt = lastUserText(messages);
  const d = parseDirectives(prompt);
  const stream = body.stream === true;
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted || openaiFailure(r, stream ? { ...d, fail: false } : d)) return;

  const plan = planAnswer({
    prompt,
    directives: d,
    tools: toolsOf(body),
    forced: forcedTool(body.tool_choice),
    afterToolResult: messages.at(-1)?.role === 'tool',
    reasoning: typeof body.reasoning_effort === 'string',
    parallel: body.parallel_tool_calls !== false,
  });
  // Like the real API: the output cap cuts the answer (finish_reason "length") and each of `n`
  // choices is an answer of its own, paid for.
  const cap = typeof body.max_completion_tokens === 'number' ? body.max_completion_tokens : typeof body.max_tokens === 'number' ? body.max_tokens : undefined;
  const cut = !plan.tools.length && cap !== undefined && plan.text.length + plan.reasoningTokens > cap;
  if (cut) {
    plan.text = plan.text.slice(0, Math.max(0, cap - plan.reasoningTokens));
    plan.outputTokens = plan.reasoningTokens + plan.text.length;
  }
  const n = typeof body.n === 'number' && Number.isInteger(body.n) && body.n > 1 ? body.n : 1;
  const promptTokens = countInputTokens(JSON.stringify([body.messages, body.tools ?? null]));
  const prefix = messages.length > 1 || body.tools ? JSON.stringify([messages.slice(0, -1), body.tools ?? null]) : '';
  const cache = cachePrefix(r.sim, prefix);
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: plan.outputTokens * n,
    total_tokens: promptTokens + plan.outputTokens * n,
    prompt_tokens_details: { cached_tokens: cache.hit ? Math.min(cache.tokens, promptTokens - 1) : 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: plan.reasoningTokens, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
  const id = simId('chatcmpl-sim');
  const created = Math.floor(Date.now() / 1000);
  const model = body.model;
  const calls = plan.tools;
  const finish = calls.length ? 'tool_calls' : cut ? 'length' : 'stop';

  if (!stream) {
    const message = calls.length
      ? {
          role: 'assistant',
          content: null,
          tool_calls: calls.map((c) => ({ id: `call_${c.id}`, type: 'function', function: { name: c.name, arguments: c.arguments } })),
          refusal: null,
          annotations: [],
        }
      : { role: 'assistant', content: plan.text.join(''), refusal: null, annotations: [] };
    const out = JSON.stringify({
      id,
      object: 'chat.completion',
      created,
      model,
      choices: Array.from({ length: n }, (_, index) => ({ index, message, logprobs: null, finish_reason: finish })),
      usage,
      service_tier: 'default',
      system_fingerprint: null,
    });
    r.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out), 'x-request-id': simId('req_') });
    r.res.end(out);
    return;
  }

  r.res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-request-id': simId('req_') });
  const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"service_tier":"default","system_fingerprint":null,`;
  const chunk = (delta: string, finishReason: string | null, index = 0) =>
    `data: ${head}"choices":[{"index":${index},"delta":${delta},"logprobs":null,"finish_reason":${finishReason ? `"${finishReason}"` : 'null'}}]}\n\n`;
  const error = `data: ${JSON.stringify({ error: { message: 'The server had an error while processing your request (simulated).', type: 'server_error', param: null, code: null } })}\n\n`;
  const contentEvents = calls.length ? calls.reduce((k, c) => k + c.pieces.length, 0) : plan.text.length;
  const out = new SimStream(r, d, Math.max(1, Math.floor(contentEvents / 2)), error);
  if (calls.length) {
    // As the API streams parallel calls: each call opens with its id and name at its own index,
    // then its arguments follow in pieces. [sim:interleave]: every call opens first, then their
    // pieces take turns (the format allows it: each delta names its call's index).
    const opening = (index: number, c: (typeof calls)[number]) => {
      const call = { index, id: `call_${c.id}`, type: 'function', function: { name: c.name, arguments: '' } };
      return JSON.stringify(index === 0 ? { role: 'assistant', content: null, tool_calls: [call], refusal: null } : { tool_calls: [call] });
    };
    const piece = (index: number, p: string) => chunk(JSON.stringify({ tool_calls: [{ index, function: { arguments: p } }] }), null);
    if (d.interleave) {
      for (const [index, c] of calls.entries()) if (!(await out.send(chunk(opening(index, c), null)))) return;
      const most = Math.max(...calls.map((c) => c.pieces.length));
      for (let k = 0; k < most; k++)
        for (const [index, c] of calls.entries()) if (k < c.pieces.length && !(await out.send(piece(index, c.pieces[k]!), true))) return;
    } else {
      for (const [index, c] of calls.entries()) {
        if (!(await out.send(chunk(opening(index, c), null)))) return;
        for (const p of c.pieces) if (!(await out.send(piece(index, p), true))) return;
      }
    }
  } else {
    for (let i = 0; i < n; i++) {
      if (!(await out.send(chunk('{"role":"assistant","content":"","refusal":null}', null, i)))) return;
      for (const w of plan.text) if (!(await out.send(chunk(`{"content":${JSON.stringify(w)}}`, null, i), true))) return;
    }
  }
  let tail = '';
  for (let i = 0; i < (calls.length ? 1 : n); i++) tail += chunk('{}', finish, i);
  const opts = body.stream_options as Record<string, unknown> | undefined;
  if (opts?.include_usage === true) tail += `data: ${head}"choices":[],"usage":${JSON.stringify(usage)}}\n\n`;
  out.end(`${tail}data: [DONE]\n\n`);
}

export const openaiChatRoutes: SimRoute[] = [{ method: 'POST', path: '/v1/chat/completions', handler: chatCompletions }];
