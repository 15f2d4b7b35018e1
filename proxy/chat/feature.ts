import type { IncomingMessage } from 'node:http';
import { PROTOCOLS } from '../protocols/index.js';
import type { Feature, GatewayDeps } from '../server/deps.js';
import { sendJson } from '../server/render.js';
import type { RequestContext } from '../server/types.js';
import { handleChat } from './handler.js';

/** The chat endpoints and the model list. */
export function chatFeature(deps: GatewayDeps): Feature {
  return {
    routes: [
      { method: 'POST', path: '/v1/chat/completions', shape: 'openai', auth: 'key', handler: (ctx) => handleChat(ctx, deps, PROTOCOLS['chat-completions']) },
      { method: 'POST', path: '/v1/responses', shape: 'openai', auth: 'key', handler: (ctx) => handleChat(ctx, deps, PROTOCOLS.responses) },
      { method: 'POST', path: '/v1/messages', shape: 'anthropic', auth: 'key', handler: (ctx) => handleChat(ctx, deps, PROTOCOLS.messages) },
      { method: 'GET', path: '/v1/models', shape: modelsShape, auth: 'key', handler: listModels },
    ],
  };
}

const modelsShape = (req: IncomingMessage) => (req.headers['anthropic-version'] ? 'anthropic' : 'openai');

/** The models of the key's group: Anthropic's list shape when the client speaks it, else OpenAI's. */
async function listModels(ctx: RequestContext): Promise<void> {
  const codes = [...ctx.key!.group.entries.keys()].sort();
  if (ctx.shape === 'anthropic') {
    const data = codes.map((id) => ({ type: 'model', id, display_name: id, created_at: '1970-01-01T00:00:00Z' }));
    sendJson(ctx.res, 200, { data, has_more: false, first_id: codes[0] ?? null, last_id: codes.at(-1) ?? null });
    return;
  }
  sendJson(ctx.res, 200, { object: 'list', data: codes.map((id) => ({ id, object: 'model', created: 0, owned_by: 'tollgate' })) });
}
