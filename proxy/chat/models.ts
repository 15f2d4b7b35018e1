import type { IncomingMessage } from 'node:http';
import { fromMicro } from '../../api/snapshot/money.js';
import { GatewayError } from '../../kernel/errors.js';
import { sendJson } from '../http/send.js';
import type { RequestContext } from '../http/context.js';
import type { GroupModel, Prices } from '../config/runtime.js';

/** Anthropic's shape when the client speaks it (anthropic-version present), else OpenAI's. */
export const modelsShape = (req: IncomingMessage) => (req.headers['anthropic-version'] ? 'anthropic' : 'openai');

// The snapshot carries no creation time; a fixed epoch keeps answers stable across reloads.
const EPOCH = '1970-01-01T00:00:00Z';

const table = (t: Map<string, bigint>) => Object.fromEntries([...t].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, fromMicro(v)]));

/**
 * The key's group's prices of one model, in credits as decimal strings: per million tokens
 * (chat), per image by tier or "tier:quality" (image), per second by resolution plus audio (video).
 */
export function pricingView(type: string, p: Prices): Record<string, unknown> {
  if (type === 'image') return { currency: 'credits', per_image: table(p.perImage) };
  if (type === 'video') return { currency: 'credits', per_second: table(p.perSecond), audio_per_second: fromMicro(p.audioPerSecond) };
  return {
    currency: 'credits',
    input_per_million: fromMicro(p.inputPerMillion),
    cached_input_per_million: fromMicro(p.cachedInputPerMillion),
    output_per_million: fromMicro(p.outputPerMillion),
  };
}

/** Extra fields beside each protocol's own: the official SDKs keep unknown fields of a model object. */
function catalogFields(entry: GroupModel) {
  const { model, prices } = entry;
  return {
    type: model.type,
    capabilities: model.type === 'chat' ? { max_output_tokens: model.maxOutputTokens, ...model.capabilities } : model.capabilities,
    pricing: pricingView(model.type, prices),
  };
}

function render(ctx: RequestContext, id: string, entry: GroupModel) {
  const base =
    ctx.shape === 'anthropic' ? { type: 'model', id, display_name: id, created_at: EPOCH } : { id, object: 'model', created: 0, owned_by: 'tollgate' };
  // Anthropic's object has its own `type: "model"`; the model's kind goes in `model_type` there.
  const { type, ...rest } = catalogFields(entry);
  return ctx.shape === 'anthropic' ? { ...base, model_type: type, ...rest } : { ...base, type, ...rest };
}

/**
 * GET /v1/models: every model of the key's group (chat, image and video codes) with its live
 * prices. ccOnly keys may read it from any client: the restriction is about calling models.
 */
export function listModels(ctx: RequestContext): void {
  const group = ctx.key!.group;
  const codes = [...group.entries.keys()].sort();
  const data = codes.map((id) => render(ctx, id, group.entries.get(id)!));
  if (ctx.shape === 'anthropic') sendJson(ctx.res, 200, { data, has_more: false, first_id: codes[0] ?? null, last_id: codes.at(-1) ?? null });
  else sendJson(ctx.res, 200, { object: 'list', data });
}

/** GET /v1/models/{id}: one model of the key's group, 404 otherwise. */
export function getModel(ctx: RequestContext): void {
  const group = ctx.key!.group;
  const id = ctx.params.id!;
  const entry = group.entries.get(id);
  if (!entry) throw new GatewayError('model_not_found', `model "${id}" does not exist in this key's group`);
  sendJson(ctx.res, 200, render(ctx, id, entry));
}
