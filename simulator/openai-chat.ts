import { parseDirectives, sleep, type Directives } from './directives.js';
import type { SimRequest, SimRoute } from './server.js';
import { answerWords, contentText, countInputTokens, simId } from './text.js';

/**
 * OpenAI Chat Completions (POST /v1/chat/completions), JSON and SSE, as api.openai.com answers:
 * a role chunk, one chunk per word, a finish chunk, and with stream_options.include_usage a
 * final chunk with empty choices and the usage, then `data: [DONE]`.
 */

export function openaiError(r: SimRequest, status: number, message: string, type: string, code: string | null, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ error: { message, type, param: null, code } });
  r.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': simId('req_'), ...headers });
  r.res.end(body);
}

/** 429/500 directives in the OpenAI error shape; true when the request was answered. */
export function openaiFailure(r: SimRequest, d: Directives): boolean {
  if (d.status === 429) {
    openaiError(r, 429, 'Rate limit reached for requests (simulated).', 'requests', 'rate_limit_exceeded', { 'retry-after': '7' });
    return true;
  }
  if (d.status === 500 || d.fail) {
    openaiError(r, 500, 'The server had an error while processing your request (simulated).', 'server_error', null);
    return true;
  }
  return false;
}

function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Record<string, unknown> | undefined;
    if (m?.role === 'user') return contentText(m.content);
  }
  return '';
}

async function chatCompletions(r: SimRequest): Promise<void> {
  const body = r.json;
  if (!body || typeof body.model !== 'string' || !Array.isArray(body.messages)) {
    openaiError(r, 400, "Invalid request: 'model' and 'messages' are required.", 'invalid_request_error', null);
    return;
  }
  const prompt = lastUserText(body.messages);
  const d = parseDirectives(prompt);
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted || openaiFailure(r, d)) return;

  const words = answerWords(prompt, d.tokens);
  const promptTokens = countInputTokens(JSON.stringify(body.messages));
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: words.length,
    total_tokens: promptTokens + words.length,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
  const id = simId('chatcmpl-sim');
  const created = Math.floor(Date.now() / 1000);
  const model = body.model;

  if (body.stream !== true) {
    const out = JSON.stringify({
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: words.join(''), refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
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
  const chunk = (delta: string, finish: string | null) =>
    `data: ${head}"choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish ? `"${finish}"` : 'null'}}]}\n\n`;
  r.res.write(chunk('{"role":"assistant","content":"","refusal":null}', null));
  const cutAt = d.cut ? Math.max(1, Math.floor(words.length / 2)) : -1;
  for (let i = 0; i < words.length; i++) {
    if (r.signal.aborted) return;
    if (i === cutAt) {
      // Let what was written reach the client, then drop the connection without an end.
      await sleep(20);
      r.res.destroy();
      return;
    }
    if (r.sim.chunkDelayMs > 0) await sleep(r.sim.chunkDelayMs, r.signal);
    r.res.write(chunk(`{"content":${JSON.stringify(words[i])}}`, null));
  }
  let tail = chunk('{}', 'stop');
  const opts = body.stream_options as Record<string, unknown> | undefined;
  if (opts?.include_usage === true) tail += `data: ${head}"choices":[],"usage":${JSON.stringify(usage)}}\n\n`;
  r.res.end(`${tail}data: [DONE]\n\n`);
}

export const openaiChatRoutes: SimRoute[] = [{ method: 'POST', path: '/v1/chat/completions', handler: chatCompletions }];
