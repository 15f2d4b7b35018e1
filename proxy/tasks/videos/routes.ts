import { accountState, checkKeySpend, InsufficientCreditsError } from '../../billing/index.js';
import { readJson } from '../../http/body.js';
import { badRequest, GatewayError } from '../../../kernel/errors.js';
import type { RequestContext, Route } from '../../http/context.js';
import type { UrlPolicy } from '../../net/url-guard.js';
import { cancelTaskHandler, getTaskHandler, submitTask, type TasksRuntime } from '../http.js';
import { ProviderError } from '../../upstreams/task-provider.js';
import { taskProvider } from '../../upstreams/index.js';
import { fitVideoRequest } from './capabilities.js';
import { videoHold, videoKind, videoUnitPrice } from './pricing.js';
import { parseVideoRequest, VIDEO_ENDPOINT } from './request.js';

/** How long a submission waits for the upstream to accept the video before leaving it to the worker. */
const START_TIMEOUT_MS = 30_000;

/** Upstream error codes that mean "refused by the safety system". */
const CONTENT_POLICY = /content_policy|content_blocked|moderation|safety|blocked/i;

/** An upstream's 429 or 5xx at submission, passed on with its status and retry-after (the contract's 429 / 5xx). */
function upstreamRefusal(err: ProviderError, status: number): GatewayError {
  const retryAfter = err.opts.retryAfterMs === undefined ? undefined : Math.ceil(err.opts.retryAfterMs / 1000);
  return new GatewayError(status === 429 ? 'rate_limited' : 'upstream_error', err.message, {
    upstreamStatus: status,
    ...(retryAfter !== undefined ? { retryAfterSeconds: retryAfter } : {}),
  });
}

/**
 * The video endpoints: the submission, the query and the cancel. Order of checks, as on chat:
 * body (400), key (401; a restricted group's 403), no credits at all (402), model in the key's
 * group (404), what the model offers (resolution 400; duration 404), price, the upstream's
 * acceptance (a refusal is a 400; its 429 or 5xx is passed on), then the hold (402).
 */
export function videoRoutes(rt: TasksRuntime, policy: () => UrlPolicy): Route[] {
  return [
    { method: 'POST', path: VIDEO_ENDPOINT, shape: 'openai', auth: 'key-after-body', handler: (ctx) => submitVideo(ctx, rt, policy()) },
    { method: 'GET', path: `${VIDEO_ENDPOINT}/:id`, shape: 'openai', auth: 'key', handler: (ctx) => getTaskHandler(ctx, rt, 'video') },
    { method: 'POST', path: `${VIDEO_ENDPOINT}/:id/cancel`, shape: 'openai', auth: 'key', handler: (ctx) => cancelTaskHandler(ctx, rt, 'video') },
  ];
}

async function submitVideo(ctx: RequestContext, rt: TasksRuntime, policy: UrlPolicy): Promise<void> {
  const { json } = await readJson(ctx, { storable: true });
  const req = parseVideoRequest(json, policy);
  const key = ctx.key ?? (await ctx.admitKey!());
  await rt.checkAvailable?.(key.account);
  const entry = key.group.entries.get(req.model);
  if (!entry || entry.model.type !== 'video') {
    throw new GatewayError('model_not_found', `model "${req.model}" is not a video model of this key's group`, { param: 'model' });
  }
  const { job, ignored } = fitVideoRequest(req, req.model, entry.model.capabilities, [...entry.prices.perSecond.keys()]);
  if (!entry.model.backends.some((b) => taskProvider(b.provider, 'video', job.mode))) {
    throw new GatewayError('not_implemented', `model "${req.model}" has no backend that runs video tasks`, { param: 'model' });
  }
  const unit = videoUnitPrice(entry.prices, job);
  if ('offered' in unit)
    throw badRequest(`resolution ${job.resolution} is not offered for model "${req.model}" (offered: ${unit.offered.join(', ')})`, 'resolution');
  const holdMicro = videoHold(unit, job.duration);

  await submitTask(ctx, rt, {
    spec: videoKind,
    mode: job.mode,
    model: req.model,
    job,
    ignored,
    price: { perSecond: unit.perSecond.toString(), audioPerSecond: unit.audioPerSecond.toString(), resolution: job.resolution },
    holdMicro,
    ...(req.webhook ? { webhook: req.webhook } : {}),
    async start(taskId) {
      // Cheap check first, so an account that cannot pay does not start upstream work; the hold
      // in the same transaction as the row stays the one that counts.
      if (holdMicro > 0n) {
        const acct = await accountState(rt.store, key.account);
        if (acct.balance - acct.held < holdMicro) throw new InsufficientCreditsError(key.account, holdMicro);
        const limit = key.spendLimitMicro;
        if (limit !== undefined) await rt.store.tx((q) => checkKeySpend(q, key.hash, holdMicro, limit));
      }
      try {
        return await rt.engine.startUpstream({
          taskId,
          model: req.model,
          kind: 'video',
          mode: job.mode,
          job,
          ignored,
          signal: AbortSignal.timeout(START_TIMEOUT_MS),
        });
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        const status = err.opts.status;
        if (err.retryable && status !== undefined) throw upstreamRefusal(err, status);
        if (CONTENT_POLICY.test(err.code)) throw badRequest(`the video was blocked by the upstream's safety policy (${err.code}): ${err.message}`, 'prompt');
        throw badRequest(`the upstream refused this video (${err.code}): ${err.message}`);
      }
    },
  });
}
