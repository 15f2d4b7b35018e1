import { createHash, randomBytes } from 'node:crypto';
import { holdForKey } from '../billing/index.js';
import { badRequest, GatewayError } from '../../kernel/errors.js';
import { sendJson } from '../http/send.js';
import type { RequestContext } from '../http/context.js';
import type { Queryable, Store } from '../store/index.js';
import type { AdmissionQueue } from './admission.js';
import type { TaskEngine, UpstreamStart } from './engine.js';
import type { TaskJob } from '../upstreams/task-provider.js';
import type { TaskSettings } from './settings.js';
import { findByIdempotencyKey, getTask, insertTask } from './store.js';
import { isActive, type TaskKind, type TaskKindSpec, type TaskRow } from './types.js';

/** What the task endpoints of every kind share. */
export interface TasksRuntime {
  store: Store;
  /** Group commit of accepted submissions (task row + hold). */
  admission: AdmissionQueue;
  engine: TaskEngine;
  settings: TaskSettings;
  /** Submissions under an Idempotency-Key in progress in this gateway, by key hash and Idempotency-Key. */
  submitting: Map<string, Promise<void>>;
  /** Wakes the task worker (a new task is due). */
  wake(): void;
  onSubmitted?(kind: TaskKind): void;
  /** 402 when the account has no credits available at all (before the model checks, as on chat). */
  checkAvailable?(account: string): Promise<void>;
}

export interface SubmitInput {
  spec: TaskKindSpec;
  mode: string;
  model: string;
  job: TaskJob;
  ignored: string[];
  /** Unit prices fixed now, micro-credits as strings (the kind's charge() reads them). */
  price: Record<string, string>;
  holdMicro: bigint;
  webhook?: { url: string; secret: string };
  /**
   * Creates the upstream task before the row is written (videos: a content-policy refusal is
   * then a 400 with nothing held). Runs after the Idempotency-Key lookup; may throw a
   * GatewayError. Undefined: the worker submits later.
   */
  start?(taskId: string): Promise<UpstreamStart | undefined>;
}

const IDEMPOTENCY = /^[\x21-\x7e]{1,255}$/;

/**
 * Accepts a validated, priced task: the credit hold and the task row are written in one
 * transaction (402 leaves neither behind; concurrent submissions share it, see admission.ts),
 * the worker is woken and the task answered at once.
 * With an Idempotency-Key the key's earlier task under that key is answered instead (the same
 * request) or refused (a different one), and nothing is held twice.
 */
export async function submitTask(ctx: RequestContext, rt: TasksRuntime, s: SubmitInput): Promise<void> {
  const raw = ctx.req.headers['idempotency-key'];
  const idem = Array.isArray(raw) ? raw[0] : raw;
  if (idem !== undefined && !IDEMPOTENCY.test(idem)) throw badRequest('Idempotency-Key must be 1 to 255 visible ASCII characters', 'Idempotency-Key');
  if (!idem) return admitTask(ctx, rt, s, undefined);
  // Retries racing under one Idempotency-Key in this process wait for the first, which starts
  // any upstream work once (replicas racing each other are settled by the unique index).
  const slot = `${ctx.key!.hash}\0${idem}`;
  for (let p = rt.submitting.get(slot); p; p = rt.submitting.get(slot)) await p;
  let done!: () => void;
  rt.submitting.set(slot, new Promise<void>((resolve) => (done = resolve)));
  try {
    await admitTask(ctx, rt, s, idem);
  } finally {
    rt.submitting.delete(slot);
    done();
  }
}

async function admitTask(ctx: RequestContext, rt: TasksRuntime, s: SubmitInput, idem: string | undefined): Promise<void> {
  const key = ctx.key!;
  const requestHash = hashRequest(s);
  if (idem) {
    const earlier = await findByIdempotencyKey(rt.store, key.hash, idem);
    if (earlier) return replay(ctx, rt, earlier, requestHash);
  }
  const id = `${s.spec.idPrefix}${randomBytes(12).toString('hex')}`;
  const deadlineAt = new Date(Date.now() + rt.settings.deadlineMs[s.spec.kind]);
  const holdId = `task:${id}`;
  const upstream = await s.start?.(id);
  let row: TaskRow | undefined;
  try {
    row = await rt.admission.admit(key.account, insertAndHold);
  } catch (err) {
    // Nothing was written (402 and the like): the upstream task started for it must not run on.
    await upstream?.cancel();
    throw err;
  }
  if (!row) {
    await upstream?.cancel();
    const earlier = await findByIdempotencyKey(rt.store, key.hash, idem!);
    return replay(ctx, rt, earlier!, requestHash);
  }
  rt.wake();
  rt.onSubmitted?.(s.spec.kind);
  ctx.log.info('task accepted', {
    requestId: ctx.requestId,
    task: id,
    kind: s.spec.kind,
    mode: s.mode,
    model: s.model,
    key: key.name,
    heldMicro: s.holdMicro.toString(),
  });
  sendJson(ctx.res, 200, { id, status: row.status, created: Math.floor(row.createdAt.getTime() / 1000) });

  /** The task row and its hold, in the admission queue's next group commit. */
  async function insertAndHold(q: Queryable): Promise<TaskRow | undefined> {
    const inserted = await insertTask(q, {
      id,
      kind: s.spec.kind,
      mode: s.mode,
      status: s.spec.initialStatus,
      keyHash: key.hash,
      keyName: key.name,
      account: key.account,
      group: key.group.name,
      model: s.model,
      request: s.job,
      requestHash,
      ...(idem ? { idempotencyKey: idem } : {}),
      ignored: s.ignored,
      deadlineAt,
      holdId,
      holdMicro: s.holdMicro,
      price: s.price,
      ...(s.webhook ? { webhookUrl: s.webhook.url, webhookSecret: s.webhook.secret } : {}),
      ...(upstream
        ? {
            ignored: upstream.ignored,
            upstream: { backend: upstream.backend, upstreamId: upstream.upstreamId, state: upstream.state, pollInMs: rt.settings.pollIntervalMs },
          }
        : {}),
    });
    if (!inserted) return undefined; // a concurrent submission took the Idempotency-Key first
    if (s.holdMicro > 0n) {
      // The task engine resolves task holds (at the latest at the deadline); the margin keeps
      // the billing sweeper's view of an expiry consistent with that.
      await holdForKey(
        q,
        {
          account: key.account,
          holdId,
          amount: s.holdMicro,
          expiresAt: new Date(deadlineAt.getTime() + 3_600_000),
          purpose: 'task',
          keyHash: key.hash,
          meta: { task: id, model: s.model, key: key.name },
        },
        key.spendLimitMicro,
      );
    }
    return inserted;
  }
}

async function replay(ctx: RequestContext, rt: TasksRuntime, earlier: TaskRow, requestHash: string): Promise<void> {
  if (earlier.requestHash !== requestHash) {
    throw badRequest(
      `Idempotency-Key was already used by this key for a different request (task ${earlier.id}); use a new key for a new request`,
      'Idempotency-Key',
    );
  }
  sendJson(ctx.res, 200, await rt.engine.view(earlier), { 'idempotent-replayed': 'true' });
}

/** The request as it was understood (not its bytes): a resend with other field order is the same request. */
function hashRequest(s: SubmitInput): string {
  const secret = s.webhook ? createHash('sha256').update(s.webhook.secret).digest('hex') : null;
  return createHash('sha256')
    .update(JSON.stringify([s.spec.kind, s.mode, s.model, s.job, s.webhook?.url ?? null, secret]))
    .digest('hex');
}

/** The caller's task of this kind, else 404 (another key's task reads exactly like a missing one). */
async function ownTask(ctx: RequestContext, rt: TasksRuntime, kind: TaskKind): Promise<TaskRow> {
  const id = ctx.params.id ?? '';
  const task = id.length <= 100 ? await getTask(rt.store, id) : undefined;
  if (!task || task.keyHash !== ctx.key!.hash || task.kind !== kind)
    throw new GatewayError('not_found', `no ${kind} task "${id.slice(0, 100)}"`, { param: 'id' });
  return task;
}

export async function getTaskHandler(ctx: RequestContext, rt: TasksRuntime, kind: TaskKind): Promise<void> {
  sendJson(ctx.res, 200, await rt.engine.view(await ownTask(ctx, rt, kind)));
}

/** Cancels an unfinished task: refund and a `cancelled` webhook. Cancelling it again answers the same; a finished task is 409. */
export async function cancelTaskHandler(ctx: RequestContext, rt: TasksRuntime, kind: TaskKind): Promise<void> {
  let task = await ownTask(ctx, rt, kind);
  if (isActive(task.status)) task = await rt.engine.cancel(task);
  if (task.status !== 'cancelled') {
    throw new GatewayError('conflict', `task ${task.id} has already ${task.status}; only unfinished tasks can be cancelled`, { param: 'id' });
  }
  sendJson(ctx.res, 200, await rt.engine.view(task));
}
