import type { Dispatcher } from 'undici';
import { Readable } from 'node:stream';
import type { CompiledBackend } from '../../api/snapshot/index.js';
import { capture, recordTaskUsage, release } from '../billing/index.js';
import type { RuntimeConfig } from '../config/runtime.js';
import type { Logger } from '../../kernel/log.js';
import type { Store } from '../store/index.js';
import { credentialOf } from '../upstreams/credentials.js';
import { enqueueDelivery } from '../webhooks/outbox.js';
import { signBody } from '../webhooks/signing.js';
import type { MediaFetcher } from './media.js';
import {
  ProviderError,
  type LocalMedia,
  type ProviderContext,
  type ProviderOutcome,
  type ProviderOutput,
  type TaskJob,
  type TaskProvider,
} from '../upstreams/task-provider.js';
import { failover, taskProvider, type AttemptFailure, type Cooldowns } from '../upstreams/index.js';
import type { TaskSettings } from './settings.js';
import { contentTypeOf, extensionOf, sniff, type ResultStorage } from './storage/index.js';
import { markTerminal, renewLease, reschedule, setUpstream, getTask, type Terminal } from './store.js';
import type { BackendRef, StoredResult, TaskKind, TaskKindSpec, TaskRow } from './types.js';

export interface EngineDeps {
  store: Store;
  log: Logger;
  config(): RuntimeConfig | undefined;
  storage: ResultStorage;
  media: MediaFetcher;
  settings: TaskSettings;
  /** Backends cooling down: the gateway's own, shared with chat. */
  cooldowns: Cooldowns;
  /** How `{env: NAME}` credentials are looked up (the settings read at start). */
  secretFromEnv: (name: string) => string | undefined;
  /** The gateway's upstream agent. */
  upstreamAgent: Dispatcher;
  kinds: Partial<Record<TaskKind, TaskKindSpec>>;
  /** This replica's worker identity (lease owner). */
  owner: string;
  /** After a terminal transition committed: wake the webhook worker, count it. */
  /** `chargedMicro`: what a succeeded task was charged (a failed or cancelled one is refunded its hold). */
  onTerminal(task: TaskRow, status: Terminal['status'], chargedMicro?: bigint): void;
}

/** An upstream task created at submission (see startUpstream), to be recorded with the new row. */
export interface UpstreamStart {
  backend: BackendRef;
  upstreamId: string;
  state: Record<string, unknown> | null;
  /** The request's ignored fields plus those the provider cannot take. */
  ignored: string[];
  /** Best effort: stops the upstream task when the gateway's task is not written after all (402, a lost Idempotency-Key race). */
  cancel(): Promise<void>;
}

class Stopping extends Error {}
class LeaseLost extends Error {}
class DeadlineReached extends Error {}

export interface TaskView {
  id: string;
  status: TaskRow['status'];
  created: number;
  model: string;
  mode: string;
  data?: { url: string }[];
  error?: { code: string; message: string };
  ignored?: string[];
}

/**
 * Runs one claimed task a step further: submit to the upstream (retrying 429/5xx/connection
 * failures a few times with backoff that honours retry-after), poll an asynchronous upstream, copy results into
 * storage, and end the task. Every terminal transition goes through finish(): status, capture
 * or refund, and the webhook in one transaction, exactly once.
 */
export class TaskEngine {
  constructor(private readonly d: EngineDeps) {}

  async run(task: TaskRow, stop: AbortSignal): Promise<void> {
    const { settings, owner } = this.d;
    const ac = new AbortController();
    const onStop = () => ac.abort(new Stopping('the worker is stopping'));
    if (stop.aborted) return;
    stop.addEventListener('abort', onStop, { once: true });
    const heartbeat = setInterval(
      () => {
        renewLease(this.d.store, task.id, owner, settings.leaseMs)
          .then((ok) => {
            if (!ok) ac.abort(new LeaseLost('the task was cancelled or taken over'));
          })
          .catch((err: Error) => this.d.log.warn('task lease renewal failed', { task: task.id, error: err.message }));
      },
      Math.max(50, Math.floor(settings.leaseMs / 3)),
    );
    const left = task.deadlineAt.getTime() - Date.now();
    const deadline = setTimeout(() => ac.abort(new DeadlineReached()), Math.max(0, left));
    try {
      if (left <= 0) {
        await this.timeOut(task);
        return;
      }
      if (task.upstreamId) await this.poll(task, ac.signal);
      else await this.submit(task, ac.signal);
    } catch (err) {
      if (ac.signal.aborted) {
        const why = ac.signal.reason as Error;
        if (why instanceof DeadlineReached) await this.timeOut(task);
        else if (why instanceof LeaseLost) this.d.log.info('task step abandoned', { task: task.id, reason: why.message });
        return;
      }
      // A bug or a store error: try again later; the deadline bounds how long.
      this.d.log.error('task step failed', { task: task.id, error: (err as Error).stack ?? String(err) });
      await reschedule(this.d.store, task.id, owner, {
        delayMs: this.backoff(task.attempts + 1),
        lastError: `internal error: ${(err as Error).message}`,
      }).catch(() => {});
    } finally {
      clearInterval(heartbeat);
      clearTimeout(deadline);
      stop.removeEventListener('abort', onStop);
    }
  }

  /** Past its deadline: fail and refund, and stop whatever still runs upstream. */
  private async timeOut(task: TaskRow): Promise<void> {
    const s = Math.round((task.deadlineAt.getTime() - task.createdAt.getTime()) / 1000);
    const before = await this.fail(task, 'timeout', `the task did not finish within ${s} seconds`, this.d.owner);
    if (before) await this.stopUpstream(before);
  }

  private backoff(attempt: number, retryAfterMs?: number): number {
    const { submitBackoffBaseMs: base, submitBackoffMaxMs: max } = this.d.settings;
    const exp = Math.min(max, base * 2 ** Math.max(0, attempt - 1));
    return retryAfterMs !== undefined ? Math.min(max, Math.max(retryAfterMs, base)) : exp;
  }

  private context(taskId: string, backend: CompiledBackend, signal: AbortSignal, files: LocalMedia[]): ProviderContext {
    return {
      backend,
      dispatcher: this.d.upstreamAgent,
      credential: credentialOf(backend, this.d.secretFromEnv),
      taskId,
      signal,
      log: this.d.log,
      fetchMedia: async (url, field) => {
        const f = await this.d.media.fetch(url, field, signal);
        files.push(f);
        return f;
      },
    };
  }

  /**
   * Submits a job through the one failover: each backend of the model that can run the task, in
   * order, until one answers. A retryable refusal (429, 5xx, unreachable) cools its backend and
   * tries the next; a final refusal throws. Undefined: the model is gone or no backend can run it.
   */
  private async submitVia(
    taskId: string,
    model: string,
    kind: TaskKind,
    mode: string,
    job: TaskJob,
    signal: AbortSignal,
  ): Promise<{
    submitted?: { backend: CompiledBackend; provider: TaskProvider; ctx: ProviderContext; outcome: ProviderOutcome };
    lastError?: ProviderError;
    error?: string;
  }> {
    const m = this.d.config()?.models.get(model);
    if (!m) return { error: `model "${model}" is no longer configured` };
    if (!m.backends.some((b) => taskProvider(b.provider, kind, mode))) return { error: `no backend of model "${model}" can run ${kind} tasks` };
    let lastError: ProviderError | undefined;
    const result = await failover(
      m.backends,
      this.d.cooldowns,
      (b) => taskProvider(b.provider, kind, mode),
      async (backend, provider) => {
        const files: LocalMedia[] = [];
        const ctx = this.context(taskId, backend, signal, files);
        try {
          return { answered: { backend, provider, ctx, outcome: await provider.submit(job, ctx) } };
        } catch (err) {
          if (signal.aborted) return { failed: { kind: 'aborted' } };
          if (!(err instanceof ProviderError) || !err.retryable) throw err;
          lastError = err;
          return { failed: failureOf(err) };
        } finally {
          await this.d.media.discard(files);
        }
      },
    );
    if ('answered' in result) return { submitted: result.answered };
    return lastError ? { lastError } : {};
  }

  /**
   * Creates the upstream task before the gateway's own task exists, so that a refusal (content
   * policy, invalid input) can be answered to the client as a 400 with nothing held or stored.
   * Returns the pending upstream task to record with the new row; undefined when the upstream
   * could not be reached in time (the worker then submits with backoff, as for images).
   * A refusal throws its ProviderError: a 429 or 5xx of the last backend tried too, so the client
   * gets the upstream's status (and retry-after) with nothing held or stored.
   */
  async startUpstream(p: {
    taskId: string;
    model: string;
    kind: TaskKind;
    mode: string;
    job: TaskJob;
    ignored: string[];
    signal: AbortSignal;
  }): Promise<UpstreamStart | undefined> {
    const r = await this.submitVia(p.taskId, p.model, p.kind, p.mode, p.job, p.signal);
    if (!r.submitted) {
      if (r.lastError?.opts.status !== undefined && !p.signal.aborted) throw r.lastError;
      // Unreachable or too slow to answer within the submission: the worker takes it from here.
      return undefined;
    }
    const { backend, provider, ctx, outcome } = r.submitted;
    if (outcome.state === 'failed') throw new ProviderError(false, outcome.code, outcome.message);
    // Only asynchronous providers are started here (every video provider is); one that answered
    // with results at once would be asked again by the worker, so it is not used this way.
    if (outcome.state !== 'pending') return undefined;
    return {
      backend: { provider: backend.provider, baseURL: backend.baseURL, model: backend.model },
      upstreamId: outcome.upstreamId,
      state: outcome.data ?? null,
      ignored: [...new Set([...p.ignored, ...(provider.ignores?.(p.job, backend) ?? [])])].sort(),
      cancel: () => this.cancelUpstream(provider, outcome.upstreamId, outcome.data ?? null, { ...ctx, signal: AbortSignal.timeout(10_000) }),
    };
  }

  private async submit(task: TaskRow, signal: AbortSignal): Promise<void> {
    const job = task.request as unknown as TaskJob;
    const attempts = task.attempts + 1;
    let r;
    try {
      r = await this.submitVia(task.id, task.model, task.kind, task.mode, job, signal);
    } catch (err) {
      if (signal.aborted || !(err instanceof ProviderError)) throw err;
      return this.retryOrFail(task, err, { attempts, ignored: task.ignored });
    }
    if (r.error) return void (await this.fail(task, 'model_unavailable', r.error, this.d.owner));
    if (!r.submitted) {
      if (signal.aborted) return;
      return this.retryOrFail(task, r.lastError ?? new ProviderError(true, 'upstream_unavailable', 'no backend answered'), { attempts, ignored: task.ignored });
    }
    const { backend, provider, ctx, outcome } = r.submitted;
    const ignored = [...new Set([...task.ignored, ...(provider.ignores?.(job, backend) ?? [])])].sort();
    const ref: BackendRef = { provider: backend.provider, baseURL: backend.baseURL, model: backend.model };
    if (outcome.state === 'pending') {
      const ok = await setUpstream(this.d.store, task.id, this.d.owner, {
        backend: ref,
        upstreamId: outcome.upstreamId,
        state: outcome.data ?? null,
        // From now on attempts counts the polls that failed in a row.
        attempts: 0,
        ignored,
        pollInMs: this.d.settings.pollIntervalMs,
      });
      // Cancelled while it was being created: stop it upstream too.
      if (!ok) await this.cancelUpstream(provider, outcome.upstreamId, outcome.data ?? null, ctx);
      return;
    }
    await this.conclude(task, outcome, provider, ctx, ignored, attempts);
  }

  private async poll(task: TaskRow, signal: AbortSignal): Promise<void> {
    const ref = task.backend!;
    const backend = this.findBackend(task.model, ref);
    const provider = taskProvider(ref.provider, task.kind, task.mode);
    if (!backend || !provider?.poll) {
      return void (await this.fail(
        task,
        'model_unavailable',
        `the backend running this task (${ref.provider} ${ref.model}) is no longer configured`,
        this.d.owner,
      ));
    }
    const ctx = this.context(task.id, backend, signal, []);
    let outcome: ProviderOutcome;
    try {
      outcome = await provider.poll(task.upstreamId!, task.upstreamState, ctx);
    } catch (err) {
      if (signal.aborted || !(err instanceof ProviderError)) throw err;
      const attempts = task.attempts + 1;
      if (!err.retryable || attempts >= this.d.settings.upstreamMaxAttempts) return void (await this.fail(task, err.code, err.message, this.d.owner));
      const delayMs = Math.min(this.backoff(attempts, err.opts.retryAfterMs), Math.max(0, task.deadlineAt.getTime() - Date.now()));
      await reschedule(this.d.store, task.id, this.d.owner, { delayMs, attempts, lastError: err.message });
      return;
    }
    if (outcome.state === 'pending') {
      await reschedule(this.d.store, task.id, this.d.owner, { delayMs: this.d.settings.pollIntervalMs, lastError: null, attempts: 0 });
      return;
    }
    await this.conclude(task, outcome, provider, ctx, task.ignored);
  }

  /** The backend of the live config an upstream task was created on (its credential may have rotated). */
  private findBackend(model: string, ref: BackendRef): CompiledBackend | undefined {
    const m = this.d.config()?.models.get(model);
    return m?.backends.find((b) => b.provider === ref.provider && b.baseURL === ref.baseURL && b.model === ref.model);
  }

  private async retryOrFail(task: TaskRow, err: ProviderError, p: { attempts: number; ignored: string[] }): Promise<void> {
    // A few tries (settings.upstreamMaxAttempts), then the task fails with the upstream's own reason.
    if (!err.retryable || p.attempts >= this.d.settings.upstreamMaxAttempts)
      return void (await this.finish(task, { status: 'failed', code: err.code, message: err.message, ignored: p.ignored, attempts: p.attempts }, this.d.owner));
    const delayMs = Math.min(this.backoff(p.attempts, err.opts.retryAfterMs), Math.max(0, task.deadlineAt.getTime() - Date.now()));
    this.d.log.info('task submission will be retried', { task: task.id, attempt: p.attempts, code: err.code, retryInMs: delayMs });
    await reschedule(this.d.store, task.id, this.d.owner, { delayMs, attempts: p.attempts, lastError: err.message, ignored: p.ignored });
  }

  private async conclude(
    task: TaskRow,
    outcome: Exclude<ProviderOutcome, { state: 'pending' }>,
    provider: TaskProvider,
    ctx: ProviderContext,
    ignored: string[],
    attempts?: number,
  ): Promise<void> {
    if (outcome.state === 'failed')
      return void (await this.finish(
        task,
        { status: 'failed', code: outcome.code, message: outcome.message, ignored, ...(attempts ? { attempts } : {}) },
        this.d.owner,
      ));
    const kind = this.kindOf(task);
    // Never more files than the task asked for (and paid for).
    const wanted = typeof task.request.n === 'number' ? task.request.n : outcome.outputs.length;
    const outputs = outcome.outputs.slice(0, wanted);
    const results: StoredResult[] = [];
    let measured: Record<string, number> = {};
    try {
      for (let i = 0; i < outputs.length; i++) {
        const stored = await this.store(task, i, outputs[i]!, provider, ctx, kind);
        results.push(stored.result);
        measured = { ...stored.measured, ...measured };
      }
    } catch (err) {
      await this.discard(results);
      if (ctx.signal.aborted) throw err;
      const e = err instanceof ProviderError ? err : new ProviderError(false, 'storage_error', `the result could not be stored: ${(err as Error).message}`);
      // An asynchronous upstream still holds the result: copy it on a later poll.
      if (e.retryable && task.upstreamId) {
        await reschedule(this.d.store, task.id, this.d.owner, { delayMs: this.backoff(2), lastError: e.message });
        return;
      }
      return void (await this.fail(task, e.code, e.message, this.d.owner, ignored));
    }
    // What the upstream reported wins over what the files say.
    const usage = { ...measured, ...outcome.usage };
    const chargedMicro = kind.charge(task, { outputs: results.length, usage });
    const billed = kind.billed(task, { outputs: results.length, usage });
    const done = await this.finish(task, { status: 'succeeded', results, usage, chargedMicro, ignored, ...(attempts ? { attempts } : {}) }, this.d.owner, {
      billed,
      upstreamModel: ctx.backend.model,
    });
    if (!done) await this.discard(results);
  }

  private async store(
    task: TaskRow,
    i: number,
    out: ProviderOutput,
    provider: TaskProvider,
    ctx: ProviderContext,
    kind: TaskKindSpec,
  ): Promise<{ result: StoredResult; measured: Record<string, number> }> {
    let body: Readable;
    let type: string | undefined;
    if (out.type === 'bytes') {
      body = Readable.from([out.data]);
      type = out.contentType ?? sniff(out.data.subarray(0, 16));
    } else {
      if (!provider.open) throw new ProviderError(false, 'upstream_invalid_response', `provider ${provider.name} returned a URL it cannot open`);
      const opened = await provider.open(out, ctx);
      body = opened.body;
      type = opened.contentType;
    }
    const ext = extensionOf(type, kind.defaultExtension);
    const key = `${task.id}/${i}.${ext}`;
    const contentType = contentTypeOf(ext);
    const m = kind.measure?.();
    if (m) {
      const source = body;
      source.once('error', (err) => m.tap.destroy(err));
      body = source.pipe(m.tap);
    }
    const { bytes } = await this.d.storage.put(key, body, contentType, this.d.settings.resultMaxBytes);
    return { result: { key, contentType, bytes }, measured: m?.usage() ?? {} };
  }

  private async discard(results: StoredResult[]): Promise<void> {
    await Promise.all(results.map((r) => this.d.storage.delete(r.key).catch(() => {})));
  }

  private kindOf(task: TaskRow): TaskKindSpec {
    const k = this.d.kinds[task.kind];
    if (!k) throw new Error(`no task kind "${task.kind}" is registered`);
    return k;
  }

  fail(task: TaskRow, code: string, message: string, owner: string | null, ignored?: string[]): Promise<TaskRow | undefined> {
    return this.finish(task, { status: 'failed', code, message, ...(ignored ? { ignored } : {}) }, owner);
  }

  /**
   * The one terminal transition: status, capture (success) or refund (failure, cancel) of the
   * hold, and the webhook in the outbox, committed together. Undefined when the task had already
   * ended (or `owner` lost its lease): nothing is charged, refunded or sent twice.
   */
  async finish(
    task: TaskRow,
    t: Terminal,
    owner: string | null,
    ran?: { billed: { images?: number; seconds?: number }; upstreamModel: string },
  ): Promise<TaskRow | undefined> {
    const body = task.webhookUrl ? Buffer.from(JSON.stringify(await this.payload(task, t))) : undefined;
    const before = await this.d.store.tx(async (q) => {
      const row = await markTerminal(q, task.id, owner, t);
      if (!row) return undefined;
      const meta = { task: row.id, model: row.model, key: row.keyName };
      if (t.status === 'succeeded') await capture(q, { holdId: row.holdId, amount: t.chargedMicro, meta });
      else await release(q, { holdId: row.holdId, kind: 'refund', meta: { ...meta, reason: t.code } });
      // The charge or the refund as a usage record, beside chat's (GET /v1/usage, the admin API, the CLI).
      const ok = t.status === 'succeeded';
      await recordTaskUsage(q, {
        taskId: row.id,
        kind: row.kind,
        keyName: row.keyName,
        keyHash: row.keyHash,
        account: row.account,
        group: row.group,
        model: row.model,
        upstreamModel: ran?.upstreamModel ?? row.backend?.model ?? '',
        status: t.status,
        credits: ok ? t.chargedMicro : 0n,
        refunded: ok ? 0n : row.holdMicro,
        ...(ok ? ran?.billed : row.kind === 'image' ? { images: 0 } : { seconds: 0 }),
        createdAt: row.createdAt,
      });
      if (body && row.webhookUrl && row.webhookSecret) {
        await enqueueDelivery(q, { taskId: row.id, url: row.webhookUrl, body, signature: signBody(row.webhookSecret, body) });
      }
      return row;
    });
    if (before) {
      this.d.log.info('task finished', {
        task: task.id,
        kind: task.kind,
        model: task.model,
        key: task.keyName,
        status: t.status,
        ...(t.status !== 'succeeded' ? { code: t.code } : {}),
      });
      this.d.onTerminal(before, t.status, t.status === 'succeeded' ? t.chargedMicro : undefined);
    }
    return before;
  }

  /** Cancels an unfinished task (refund, webhook), then asks the upstream to stop. */
  async cancel(task: TaskRow): Promise<TaskRow> {
    const before = await this.finish(task, { status: 'cancelled', code: 'cancelled', message: 'the task was cancelled by its owner' }, null);
    if (before) await this.stopUpstream(before);
    return (await getTask(this.d.store, task.id))!;
  }

  /** Best effort: an upstream task of a task that ended without it (cancel, deadline) is cancelled upstream. */
  private async stopUpstream(row: TaskRow): Promise<void> {
    if (!row.upstreamId || !row.backend) return;
    const backend = this.findBackend(row.model, row.backend);
    const provider = taskProvider(row.backend.provider, row.kind, row.mode);
    if (backend && provider)
      await this.cancelUpstream(provider, row.upstreamId, row.upstreamState, this.context(row.id, backend, AbortSignal.timeout(10_000), []));
  }

  private async cancelUpstream(provider: TaskProvider, upstreamId: string, data: Record<string, unknown> | null, ctx: ProviderContext): Promise<void> {
    if (!provider.cancel) return;
    try {
      await provider.cancel(upstreamId, data, { ...ctx, signal: AbortSignal.timeout(10_000) });
    } catch (err) {
      this.d.log.warn('upstream cancel failed', { task: ctx.taskId, error: (err as Error).message });
    }
  }

  /** What GET answers and webhooks carry. Result URLs are signed afresh each time. */
  async view(task: TaskRow): Promise<TaskView> {
    const base: TaskView = { id: task.id, status: task.status, created: Math.floor(task.createdAt.getTime() / 1000), model: task.model, mode: task.mode };
    if (task.status === 'succeeded') base.data = await this.urls(task.results ?? []);
    if (task.status === 'failed' || task.status === 'cancelled') base.error = { code: task.errorCode ?? 'failed', message: task.errorMessage ?? '' };
    if (task.ignored.length > 0) base.ignored = task.ignored;
    return base;
  }

  /** The webhook body: {id, status, data | error}. */
  private async payload(task: TaskRow, t: Terminal): Promise<Record<string, unknown>> {
    if (t.status === 'succeeded') return { id: task.id, status: t.status, data: await this.urls(t.results) };
    return { id: task.id, status: t.status, error: { code: t.code, message: t.message } };
  }

  private async urls(results: StoredResult[]): Promise<{ url: string }[]> {
    const expires = new Date(Date.now() + this.d.settings.resultUrlTtlSeconds * 1000);
    return Promise.all(results.map(async (r) => ({ url: await this.d.storage.url(r.key, expires) })));
  }
}

/** How a retryable provider refusal counts for the backend's cooldown. */
function failureOf(err: ProviderError): AttemptFailure {
  return err.opts.status ? { kind: 'status', status: err.opts.status } : { kind: 'unavailable' };
}
