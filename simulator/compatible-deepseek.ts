import { anthropicMessagesRoutes } from './anthropic-messages.js';
import { planAnswer } from './chat-plan.js';
import { parseDirectives, sleep } from './directives.js';
import { openaiError } from './openai-error.js';
import type { SimRequest, SimRoute } from './server.js';
import { sendJson, SimStream } from './sim-stream.js';
import { countInputTokens, simId } from './text.js';

/**
 * An OpenAI-compatible server in DeepSeek's style, under /deepseek (baseURL {sim}/deepseek):
 *   POST /deepseek/chat/completions          Chat Completions; `deepseek-reasoner` thinks aloud in
 *                                            `reasoning_content` (JSON and stream deltas), usage
 *                                            with completion_tokens_details.reasoning_tokens and
 *                                            prompt_cache_hit/miss_tokens
 *   POST /deepseek/anthropic/v1/messages     its Anthropic-compatible Messages endpoint (the
 *                                            simulator's Messages), as DeepSeek, Kimi and GLM offer
 * A Bearer key is required on both.
 */

function authorized(r: SimRequest): boolean {
  if (/^Bearer \S+/.test(r.req.headers.authorization ?? '') || r.req.headers['x-api-key']) return true;
  openaiError(r, 401, 'Authentication Fails, Your api key is invalid', 'authentication_error', 'invalid_request_error');
  return false;
}

async function chat(r: SimRequest): Promise<void> {
  if (!authorized(r)) return;
  const body = r.json;
  if (!body || typeof body.model !== 'string' || !Array.isArray(body.messages)) return openaiError(r, 400, 'Invalid request', 'invalid_request_error', null);
  const messages = body.messages as { role?: unknown; content?: unknown }[];
  const last = messages.at(-1);
  const prompt = typeof last?.content === 'string' ? last.content : '';
  const d = parseDirectives(prompt);
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted) return;
  if (d.status === 429) return openaiError(r, 429, 'Rate limit reached (simulated)', 'rate_limit_error', null, null, { 'retry-after': '7' });
  const plan = planAnswer({
    prompt,
    directives: d,
    tools: [],
    forced: undefined,
    afterToolResult: false,
    reasoning: body.model === 'deepseek-reasoner',
    parallel: false,
  });
  const promptTokens = countInputTokens(JSON.stringify(body.messages));
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: plan.outputTokens,
    total_tokens: promptTokens + plan.outputTokens,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: plan.reasoningTokens },
    prompt_cache_hit_tokens: 0,
    prompt_cache_miss_tokens: promptTokens,
  };
  const id = simId('');
  const created = Math.floor(Date.now() / 1000);
  const reasoning = plan.reasoning.join('');
  if (body.stream !== true) {
    const message = { role: 'assistant', content: plan.text.join(''), ...(reasoning ? { reasoning_content: reasoning } : {}) };
    return sendJson(r, 200, {
      id,
      object: 'chat.completion',
      created,
      model: body.model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: 'stop' }],
      usage,
    });
  }
  r.res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  const chunk = (delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra })}\n\n`;
  const out = new SimStream(
    r,
    d,
    Math.max(1, Math.floor((plan.reasoning.length + plan.text.length) / 2)),
    'data: {"error":{"message":"simulated","type":"server_error"}}\n\n',
  );
  if (!(await out.send(chunk({ role: 'assistant', content: null, ...(reasoning ? { reasoning_content: '' } : {}) }, null)))) return;
  for (const t of plan.reasoning) if (!(await out.send(chunk({ content: null, reasoning_content: t }, null), true))) return;
  for (const t of plan.text) if (!(await out.send(chunk({ content: t, reasoning_content: null }, null), true))) return;
  // DeepSeek puts the usage on the finishing chunk itself (its choices not empty).
  out.end(`${chunk({ content: '' }, 'stop', { usage })}data: [DONE]\n\n`);
}

const messages = (r: SimRequest) => anthropicMessagesRoutes[0]!.handler(r);

export const compatibleDeepseekRoutes: SimRoute[] = [
  { method: 'POST', path: '/deepseek/chat/completions', handler: chat },
  {
    method: 'POST',
    path: '/deepseek/anthropic/v1/messages',
    handler: async (r) => {
      if (authorized(r)) await messages(r);
    },
  },
];
