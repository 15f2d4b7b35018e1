import { openaiChatRoutes } from './openai-chat.js';
import { openaiResponsesRoutes } from './openai-responses.js';
import type { SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';

/**
 * Azure OpenAI as NAME.openai.azure.com answers it: the OpenAI wire (the simulator's own Chat
 * Completions and Responses) at Azure's paths, with Azure's checks in front:
 *   POST /openai/deployments/{deployment}/chat/completions?api-version=...
 *   POST /openai/responses?api-version=...
 *   POST /openai/v1/chat/completions, /openai/v1/responses     (the v1 API: no api-version)
 * An `api-key` header or an `Authorization: Bearer` token is required (401 otherwise); a
 * deployment path without api-version is Azure's 404. The deployment is the model. Streams
 * open with Azure's content-filter chunk (empty choices, prompt_filter_results), as Azure's do;
 * a 429 carries `retry-after-ms` beside `retry-after`.
 */

function azureError(r: SimRequest, status: number, code: string, message: string): void {
  sendJson(r, status, { error: { code, message } }, { 'apim-request-id': 'sim' });
}

const chat = (r: SimRequest) => openaiChatRoutes[0]!.handler(r);
const responses = (r: SimRequest) => openaiResponsesRoutes[0]!.handler(r);

function authorized(r: SimRequest): boolean {
  const bearer = /^Bearer \S+/.test(r.req.headers.authorization ?? '');
  if (r.req.headers['api-key'] || bearer) return true;
  azureError(
    r,
    401,
    '401',
    'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.',
  );
  return false;
}

/** Azure streams start with the prompt's content-filter results, in a chunk with no choices. */
function withFilterChunk(r: SimRequest): void {
  if (r.json?.stream !== true) return;
  const res = r.res;
  const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean;
  let first = true;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (first) {
      first = false;
      const filter = {
        choices: [],
        created: 0,
        id: '',
        model: '',
        object: '',
        prompt_filter_results: [{ prompt_index: 0, content_filter_results: { hate: { filtered: false, severity: 'safe' } } }],
      };
      write(`data: ${JSON.stringify(filter)}\n\n`);
    }
    return write(chunk, ...rest);
  }) as typeof res.write;
}

/** Azure's 429s say how long to wait to the millisecond too (`retry-after-ms`), beside `retry-after`. */
function withRetryAfterMs(r: SimRequest): void {
  const res = r.res;
  const writeHead = res.writeHead.bind(res) as (status: number, ...rest: unknown[]) => typeof res;
  res.writeHead = (status: number, ...rest: unknown[]) => {
    if (status === 429) res.setHeader('retry-after-ms', '7000');
    return writeHead(status, ...rest);
  };
}

async function deployment(r: SimRequest): Promise<void> {
  if (!authorized(r)) return;
  if (!r.query.get('api-version')) return azureError(r, 404, '404', 'Resource not found');
  if (r.json) r.json.model = r.params.deployment;
  withFilterChunk(r);
  withRetryAfterMs(r);
  await chat(r);
}

async function versioned(r: SimRequest, handler: (r: SimRequest) => Promise<void> | void, needsVersion: boolean): Promise<void> {
  if (!authorized(r)) return;
  if (needsVersion && !r.query.get('api-version')) return azureError(r, 400, 'BadRequest', 'Missing required query parameter: api-version');
  if (handler === chat) withFilterChunk(r);
  withRetryAfterMs(r);
  await handler(r);
}

export const azureOpenaiRoutes: SimRoute[] = [
  { method: 'POST', path: '/openai/deployments/:deployment/chat/completions', handler: deployment },
  { method: 'POST', path: '/openai/responses', handler: (r) => versioned(r, responses, true) },
  { method: 'POST', path: '/openai/v1/chat/completions', handler: (r) => versioned(r, chat, false) },
  { method: 'POST', path: '/openai/v1/responses', handler: (r) => versioned(r, responses, false) },
];
