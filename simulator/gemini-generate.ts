import { cachePrefix, planAnswer, type Plan, type ToolCall, type ToolSpec } from './chat-plan.js';
import { parseDirectives, sleep, type Directives } from './directives.js';
import type { SimRequest, SimRoute } from './server.js';
import { sendJson, SimStream, sseHeaders } from './sim-stream.js';
import { countInputTokens, simId } from './text.js';

/**
 * Gemini's generateContent as generativelanguage.googleapis.com answers it (Vertex AI's
 * publishers/google paths answer the same bodies, simulator/gemini-vertex.ts):
 *   POST /v1beta/models/{model}:generateContent              JSON
 *   POST /v1beta/models/{model}:streamGenerateContent?alt=sse  SSE, one GenerateContentResponse an event, CRLF line ends
 *   POST /v1beta/models/{model}:countTokens                  {totalTokens}
 * Key in x-goog-api-key (or ?key=). Thoughts (`thought: true` parts) when
 * thinkingConfig.includeThoughts is set; a thoughtSignature on the first functionCall part (or
 * the last text part after thinking); a model named gemini-3* refuses a model turn whose first
 * function call lost its signature, and every model refuses a signature it did not make, as
 * Gemini does. `[sim:parallel]` calls every declared function at once. Implicit caching: a
 * system instruction and tools of 64 tokens or more seen before are reported as
 * cachedContentTokenCount.
 */

export const SKIP_SIGNATURE = 'skip_thought_signature_validator';
const SIG_PREFIX = 'sim-gemini:';

export function geminiError(r: SimRequest, status: number, state: string, message: string, headers: Record<string, string> = {}): void {
  sendJson(r, status, { error: { code: status, message, status: state } }, headers);
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const partsOf = (c: unknown): Json[] => (isObj(c) && Array.isArray(c.parts) ? c.parts.filter(isObj) : []);

function validSignature(sig: unknown): boolean {
  if (typeof sig !== 'string') return false;
  return sig === SKIP_SIGNATURE || Buffer.from(sig, 'base64').toString('utf8').startsWith(SIG_PREFIX);
}

/** What Gemini checks of a request before answering; undefined when it is valid. */
function invalid(body: Json, model: string): string | undefined {
  if (!Array.isArray(body.contents) || body.contents.length === 0) return '* GenerateContentRequest.contents: contents is not specified';
  for (const [i, c] of (body.contents as unknown[]).entries()) {
    if (!isObj(c) || (c.role !== 'user' && c.role !== 'model')) return `* GenerateContentRequest.contents[${i}].role: must be user or model`;
    const parts = partsOf(c);
    if (parts.length === 0) return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`;
    for (const p of parts) if (p.thoughtSignature !== undefined && !validSignature(p.thoughtSignature)) return 'Corrupted thought signature.';
    const firstCall = parts.find((p) => isObj(p.functionCall));
    if (c.role === 'model' && firstCall && /gemini-3/.test(model) && firstCall.thoughtSignature === undefined) {
      return `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${String((firstCall.functionCall as Json).name)}\` , position ${i + 1}.`;
    }
  }
  return undefined;
}

function toolsOf(body: Json): ToolSpec[] {
  const out: ToolSpec[] = [];
  for (const t of Array.isArray(body.tools) ? body.tools : []) {
    if (!isObj(t) || !Array.isArray(t.functionDeclarations)) continue;
    for (const f of t.functionDeclarations as unknown[]) {
      if (isObj(f) && typeof f.name === 'string') out.push({ name: f.name, schema: f.parametersJsonSchema ?? f.parameters });
    }
  }
  return out;
}

function lastUser(contents: unknown[]): Json | undefined {
  for (let i = contents.length - 1; i >= 0; i--) {
    const c = contents[i];
    if (isObj(c) && c.role === 'user') return c;
  }
  return undefined;
}

export function inputTokens(body: Json): number {
  return countInputTokens(JSON.stringify([body.systemInstruction ?? null, body.contents, body.tools ?? null]));
}

interface Answer {
  plan: Plan;
  calls: ToolCall[];
  finishReason: string;
  usage: Json;
  signature: string;
}

function answer(r: SimRequest, body: Json, prompt: string, d: Directives): Answer {
  const contents = body.contents as unknown[];
  const user = lastUser(contents);
  const gen = isObj(body.generationConfig) ? body.generationConfig : {};
  const thinking = isObj(gen.thinkingConfig) ? gen.thinkingConfig : {};
  const fcc = isObj(body.toolConfig) && isObj(body.toolConfig.functionCallingConfig) ? body.toolConfig.functionCallingConfig : {};
  const allowed = Array.isArray(fcc.allowedFunctionNames) ? fcc.allowedFunctionNames : [];
  const tools = toolsOf(body);
  const afterToolResult = partsOf(user).some((p) => isObj(p.functionResponse));
  // [sim:parallel]: one call of every tool given, in one turn (as [sim:tool=N] with N tools).
  const plan = planAnswer({
    prompt,
    directives: prompt.includes('[sim:parallel]') && tools.length ? { ...d, tool: tools.length } : d,
    tools: fcc.mode === 'NONE' ? [] : tools,
    forced: fcc.mode === 'ANY' ? (typeof allowed[0] === 'string' ? allowed[0] : '*') : undefined,
    afterToolResult,
    reasoning: thinking.includeThoughts === true,
    parallel: true,
  });
  const calls: ToolCall[] = plan.tools;
  let finishReason = 'STOP';
  const max = typeof gen.maxOutputTokens === 'number' ? gen.maxOutputTokens : Infinity;
  if (!calls.length && plan.text.length + plan.reasoning.length > max) {
    plan.text = plan.text.slice(0, Math.max(0, max - plan.reasoning.length));
    plan.outputTokens = plan.text.length + plan.reasoning.length;
    finishReason = 'MAX_TOKENS';
  }
  const prompted = inputTokens(body);
  let cached = 0;
  const prefix = JSON.stringify([body.systemInstruction ?? null, body.tools ?? null]);
  if (countInputTokens(prefix) >= 64) {
    const c = cachePrefix(r.sim, `gemini:${prefix}`);
    if (c.hit) cached = Math.min(c.tokens, prompted - 1);
  }
  const candidates = plan.outputTokens - plan.reasoningTokens;
  const usage: Json = {
    promptTokenCount: prompted,
    candidatesTokenCount: candidates,
    totalTokenCount: prompted + plan.outputTokens,
    ...(cached ? { cachedContentTokenCount: cached } : {}),
    ...(plan.reasoningTokens ? { thoughtsTokenCount: plan.reasoningTokens } : {}),
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompted }],
  };
  return { plan, calls, finishReason, usage, signature: Buffer.from(`${SIG_PREFIX}${simId('')}`).toString('base64') };
}

const callPart = (c: ToolCall, signature?: string): Json => ({
  functionCall: { name: c.name, args: JSON.parse(c.arguments) as unknown },
  ...(signature ? { thoughtSignature: signature } : {}),
});

/** One generateContent call on `model` (the caller checked the credential). */
export async function generateContent(r: SimRequest, model: string, stream: boolean): Promise<void> {
  const body = r.json;
  if (!body) return geminiError(r, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
  const bad = invalid(body, model);
  if (bad) return geminiError(r, 400, 'INVALID_ARGUMENT', bad);
  const user = lastUser(body.contents as unknown[]);
  const prompt = partsOf(user)
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .join('\n');
  const d = parseDirectives(prompt);
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted) return;
  if (d.status === 429) return geminiError(r, 429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota). (simulated)', { 'retry-after': '7' });
  if (d.status === 500 || (d.fail && !stream)) return geminiError(r, 500, 'INTERNAL', 'An internal error has occurred. (simulated)');

  const a = answer(r, body, prompt, d);
  const responseId = simId('sim');
  const modelVersion = model;
  const { plan, calls } = a;
  if (!stream) {
    const parts: Json[] = [];
    if (plan.reasoning.length) parts.push({ text: plan.reasoning.join(''), thought: true });
    calls.forEach((c, i) => parts.push(callPart(c, i === 0 ? a.signature : undefined)));
    if (!calls.length) parts.push({ text: plan.text.join(''), ...(plan.reasoning.length ? { thoughtSignature: a.signature } : {}) });
    const candidate = { content: { role: 'model', parts }, finishReason: a.finishReason, index: 0 };
    return sendJson(r, 200, { candidates: [candidate], usageMetadata: a.usage, modelVersion, responseId });
  }

  r.res.writeHead(200, sseHeaders('x-goog-request-id', simId('')));
  const chunk = (parts: Json[], last: boolean) => {
    const candidate = { content: { role: 'model', parts }, ...(last ? { finishReason: a.finishReason } : {}), index: 0 };
    const usage = last ? a.usage : { promptTokenCount: a.usage.promptTokenCount, totalTokenCount: a.usage.promptTokenCount };
    return `data: ${JSON.stringify({ candidates: [candidate], usageMetadata: usage, modelVersion, responseId })}\r\n\r\n`;
  };
  const error = `data: ${JSON.stringify({ error: { code: 503, message: 'The model is overloaded. Please try again later. (simulated)', status: 'UNAVAILABLE' } })}\r\n\r\n`;
  const pieces = plan.reasoning.length + plan.text.length + calls.length;
  const out = new SimStream(r, d, Math.max(1, Math.floor(pieces / 2)), error);
  for (const t of plan.reasoning) if (!(await out.send(chunk([{ text: t, thought: true }], false), true))) return;
  if (calls.length) {
    out.end(
      chunk(
        calls.map((c, i) => callPart(c, i === 0 ? a.signature : undefined)),
        true,
      ),
    );
    return;
  }
  for (let i = 0; i < plan.text.length - 1; i++) if (!(await out.send(chunk([{ text: plan.text[i] }], false), true))) return;
  const lastText = plan.text.at(-1) ?? '';
  out.end(chunk([{ text: lastText, ...(plan.reasoning.length ? { thoughtSignature: a.signature } : {}) }], true));
}

export function countTokens(r: SimRequest): void {
  const body = r.json;
  if (!body) return geminiError(r, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
  const inner = isObj(body.generateContentRequest) ? body.generateContentRequest : body;
  sendJson(r, 200, { totalTokens: inputTokens(inner), promptTokensDetails: [{ modality: 'TEXT', tokenCount: inputTokens(inner) }] });
}

async function studio(r: SimRequest): Promise<void> {
  const [model, method] = (r.params.model ?? '').split(':');
  if (!r.req.headers['x-goog-api-key'] && !r.query.get('key')) {
    return geminiError(
      r,
      403,
      'PERMISSION_DENIED',
      "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    );
  }
  if (method === 'generateContent') return generateContent(r, model!, false);
  if (method === 'streamGenerateContent') {
    if (r.query.get('alt') !== 'sse') return geminiError(r, 400, 'INVALID_ARGUMENT', 'the simulator streams with ?alt=sse only');
    return generateContent(r, model!, true);
  }
  if (method === 'countTokens') return countTokens(r);
  geminiError(r, 404, 'NOT_FOUND', `simulator: no method ${method ?? ''} on models/${model ?? ''}`);
}

export const geminiGenerateRoutes: SimRoute[] = [
  { method: 'POST', path: '/v1beta/models/:model', handler: studio },
  { method: 'POST', path: '/v1/models/:model', handler: studio },
];
