import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Counter } from 'prom-client';
import { sendJson } from '../http/send.js';
import { GatewayError } from '../../kernel/errors.js';
import type { Feature, GatewayDeps } from '../http/deps.js';
import type { Route } from '../http/context.js';
import { deliveriesOf } from '../webhooks/outbox.js';
import { createDeliveryWorker } from '../webhooks/worker.js';
import type { UrlPolicy } from '../net/url-guard.js';
import { AdmissionQueue } from './admission.js';
import { TaskEngine } from './engine.js';
import type { TasksRuntime } from './http.js';
import { imageKind } from './images/pricing.js';
import { imageRoutes } from './images/routes.js';
import { MediaFetcher } from './media.js';
import { resolveSettings, settingsFrom, type TaskSettings } from './settings.js';
import { LocalStorage, S3Storage, sharedSigningKey, type ResultStorage } from './storage/index.js';
import { taskListRoutes } from './listing.js';
import { getTask } from './store.js';
import { videoKind } from './videos/pricing.js';
import { videoRoutes } from './videos/routes.js';
import { createTaskWorker } from './worker.js';
import { backlogGauges } from '../metrics/backlog.js';
import { readBacklog } from './backlog.js';
import { taskEnded } from './observe.js';

/**
 * Asynchronous tasks: the image and video endpoints, result files, the task worker and the webhook
 * delivery worker. Settings: defaults, then the TOLLGATE_* environment (deps.settings), then `overrides` (tests).
 */
export function tasksFeature(overrides: Partial<TaskSettings> = {}) {
  return (deps: GatewayDeps): Feature & { adminRoutes: Route[] } => {
    const settings = resolveSettings(settingsFrom(deps.settings.tasks), overrides);
    const { store, options } = deps;
    const log = deps.log.child({ component: 'tasks' });
    const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    const policy = (): UrlPolicy => ({ allowLoopback: options.allowLoopbackURLs, allowPrivate: options.allowPrivateURLs });

    let key: Promise<Buffer> | undefined;
    const signingKey = () =>
      (key ??= sharedSigningKey(store).catch((err: unknown) => {
        key = undefined;
        throw err;
      }));
    const s3 = options.s3 ?? deps.settings.s3;
    // Without a data folder, results live in a temporary folder for the life of the process.
    const tempResults = s3 || options.dataDir ? undefined : join(tmpdir(), `tollgate-results-${process.pid}-${randomBytes(4).toString('hex')}`);
    const storage: ResultStorage & { route?(): Route } = s3
      ? new S3Storage(s3)
      : new LocalStorage(tempResults ?? join(options.dataDir!, 'results'), () => options.publicBaseURL, signingKey);

    const submitted = new Counter({
      name: 'tollgate_tasks_submitted_total',
      help: 'Tasks accepted, by kind',
      labelNames: ['kind'] as const,
      registers: [deps.registry],
    });
    const finished = new Counter({
      name: 'tollgate_tasks_finished_total',
      help: 'Tasks ended, by kind and status',
      labelNames: ['kind', 'status'] as const,
      registers: [deps.registry],
    });
    const attempts = new Counter({
      name: 'tollgate_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome (delivered, retry, failed)',
      labelNames: ['outcome'] as const,
      registers: [deps.registry],
    });

    backlogGauges(deps.registry, () => readBacklog(store));

    const media = new MediaFetcher(policy(), settings.mediaMaxBytes);
    const delivery = createDeliveryWorker({
      store,
      log,
      owner,
      policy: policy(),
      retryScheduleS: settings.webhookRetryScheduleS,
      timeoutMs: settings.webhookTimeoutMs,
      intervalMs: options.workerIntervalMs,
      attempts,
    });
    const engine = new TaskEngine({
      store,
      log,
      config: deps.config,
      cooldowns: deps.cooldowns,
      secretFromEnv: deps.settings.secretFromEnv,
      upstreamAgent: deps.upstreamAgent,
      storage,
      media,
      settings,
      kinds: { image: imageKind, video: videoKind },
      owner,
      onTerminal: (task, status, chargedMicro) => {
        finished.inc({ kind: task.kind, status });
        if (deps.telemetry) taskEnded(deps.telemetry.metrics, task, status, chargedMicro);
        if (task.webhookUrl) delivery.wake();
      },
    });
    const worker = createTaskWorker({
      engine,
      store,
      log,
      owner,
      leaseMs: settings.leaseMs,
      intervalMs: options.workerIntervalMs,
      concurrency: settings.concurrency,
    });
    const admission = new AdmissionQueue(store);
    const rt: TasksRuntime = {
      store,
      admission,
      engine,
      settings,
      submitting: new Map(),
      wake: () => worker.wake(),
      onSubmitted: (kind) => submitted.inc({ kind }),
      ...(deps.billing.checkAvailable ? { checkAvailable: (account: string) => deps.billing.checkAvailable!(account) } : {}),
    };

    const lists = taskListRoutes(rt);
    return {
      routes: [...imageRoutes(rt, policy), ...videoRoutes(rt, policy), ...(storage.route ? [storage.route()] : []), ...lists.routes],
      adminRoutes: [
        ...lists.adminRoutes,
        {
          method: 'GET',
          path: '/admin/v1/tasks/:id',
          shape: 'openai',
          auth: 'admin',
          handler: async (ctx) => {
            const task = await getTask(store, ctx.params.id ?? '');
            if (!task) throw new GatewayError('not_found', `no task "${(ctx.params.id ?? '').slice(0, 100)}"`, { param: 'id' });
            const { webhookSecret: _secret, keyHash: _hash, ...rest } = task;
            sendJson(ctx.res, 200, {
              ...rest,
              holdMicro: task.holdMicro.toString(),
              chargedMicro: task.chargedMicro?.toString() ?? null,
              view: await engine.view(task),
              webhooks: await deliveriesOf(store, task.id),
            });
          },
        },
      ],
      async start() {
        await signingKey();
        worker.start();
        delivery.start();
        log.info('task workers started', { owner, storage: storage.kind });
      },
      async stop() {
        await admission.drained();
        await Promise.all([worker.stop(settings.stopGraceMs), delivery.stop(settings.stopGraceMs)]);
        await media.close();
        if (tempResults) await rm(tempResults, { recursive: true, force: true });
      },
    };
  };
}
