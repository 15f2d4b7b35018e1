import type { UrlPolicy } from '../../net/url-guard.js';
import { readJson } from '../../http/body.js';
import { badRequest, GatewayError } from '../../../kernel/errors.js';
import type { RequestContext, Route } from '../../http/context.js';
import { cancelTaskHandler, getTaskHandler, submitTask, type TasksRuntime } from '../http.js';
import { taskProvider } from '../../upstreams/index.js';
import { imageKind, imageUnitPrice } from './pricing.js';
import { ENDPOINT, parseImageRequest, type ImageMode } from './request.js';

/**
 * The image endpoints: three submissions, the query and the cancel. Order of checks, as on chat:
 * body (400), key (401; a restricted group's 403), no credits at all (402), model in the key's
 * group (404), what the model can do (400), price (400 for a tier it is not offered at), then
 * the hold (402).
 */
export function imageRoutes(rt: TasksRuntime, policy: () => UrlPolicy): Route[] {
  const submit = (mode: ImageMode): Route => ({
    method: 'POST',
    path: ENDPOINT[mode],
    shape: 'openai',
    auth: 'key-after-body',
    handler: (ctx) => submitImage(ctx, rt, mode, policy()),
  });
  return [
    submit('generate'),
    submit('edit'),
    submit('inpaint'),
    { method: 'GET', path: '/v1/images/generations/:id', shape: 'openai', auth: 'key', handler: (ctx) => getTaskHandler(ctx, rt, 'image') },
    { method: 'POST', path: '/v1/images/generations/:id/cancel', shape: 'openai', auth: 'key', handler: (ctx) => cancelTaskHandler(ctx, rt, 'image') },
  ];
}

async function submitImage(ctx: RequestContext, rt: TasksRuntime, mode: ImageMode, policy: UrlPolicy): Promise<void> {
  const { json } = await readJson(ctx, { storable: true });
  const { job, webhook, ignored } = parseImageRequest(json, mode, policy);
  const model = json.model as string;
  const key = ctx.key ?? (await ctx.admitKey!());
  await rt.checkAvailable?.(key.account);
  const entry = key.group.entries.get(model);
  if (!entry || entry.model.type !== 'image') {
    throw new GatewayError('model_not_found', `model "${model}" is not an image model of this key's group`, { param: 'model' });
  }
  const caps = entry.model.capabilities as { inpaint?: boolean; qualities?: string[] };
  if (mode === 'inpaint' && caps.inpaint !== true) throw badRequest(`model "${model}" does not support inpainting`, 'model');
  if (job.quality !== undefined) {
    const offered = caps.qualities ?? [];
    const match = offered.find((q) => q.toLowerCase() === job.quality!.toLowerCase());
    if (!match) {
      throw badRequest(
        offered.length
          ? `quality "${job.quality}" is not offered by model "${model}" (offered: ${offered.join(', ')})`
          : `model "${model}" has no quality tiers; leave quality out`,
        'quality',
      );
    }
    job.quality = match;
  }
  if (!entry.model.backends.some((b) => taskProvider(b.provider, 'image', mode))) {
    throw new GatewayError('not_implemented', `model "${model}" has no backend that runs image tasks`, { param: 'model' });
  }
  const price = imageUnitPrice(entry.prices.perImage, job.resolution, job.quality);
  if ('offered' in price) {
    throw badRequest(`resolution ${job.resolution} is not offered for model "${model}" (offered: ${price.offered.join(', ')})`, 'resolution');
  }
  await submitTask(ctx, rt, {
    spec: imageKind,
    mode,
    model,
    job,
    ignored,
    price: { unit: price.unit.toString(), ...(price.key ? { key: price.key } : {}) },
    holdMicro: price.unit * BigInt(job.n),
    ...(webhook ? { webhook } : {}),
  });
}
