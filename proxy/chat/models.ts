import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../../kernel/errors.js';
import { sendJson } from '../http/send.js';
import type { RequestContext } from '../http/context.js';
import { checkClient } from './client-policy.js';

/** Anthropic's shape when the client speaks it (anthropic-version present), else OpenAI's. */
export const modelsShape = (req: IncomingMessage) => (req.headers['anthropic-version'] ? 'anthropic' : 'openai');

// The snapshot carries no creation time; a fixed epoch keeps answers stable across reloads.
const EPOCH = '1970-01-01T00:00:00Z';

function render(ctx: RequestContext, id: string) {
  return ctx.shape === 'anthropic' ? { type: 'model', id, display_name: id, created_at: EPOCH } : { id, object: 'model', created: 0, owned_by: 'tollgate' };
}

/** GET /v1/models: every model of the key's group (chat, image and video codes). */
export function listModels(ctx: RequestContext): void {
  const group = ctx.key!.group;
  checkClient(group, ctx.req, {}, 'models');
  const codes = [...group.entries.keys()].sort();
  const data = codes.map((id) => render(ctx, id));
  if (ctx.shape === 'anthropic') sendJson(ctx.res, 200, { data, has_more: false, first_id: codes[0] ?? null, last_id: codes.at(-1) ?? null });
  else sendJson(ctx.res, 200, { object: 'list', data });
}

/** GET /v1/models/{id}: one model of the key's group, 404 otherwise. */
export function getModel(ctx: RequestContext): void {
  const group = ctx.key!.group;
  checkClient(group, ctx.req, {}, 'models');
  const id = ctx.params.id!;
  if (!group.entries.has(id)) throw new GatewayError('model_not_found', `model "${id}" does not exist in this key's group`);
  sendJson(ctx.res, 200, render(ctx, id));
}
