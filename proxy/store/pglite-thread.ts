import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../kernel/log.js';
import { collectGarbage } from './collect.js';
import type { DataDirLock } from './lock.js';
import type { Call, ErrorData, Reply, WorkerInit } from './pglite-worker.js';
import type { Queryable, QueryResult, Store } from './types.js';

/** A call of the worker's that got no answer because the worker is gone. */
export class StoreThreadError extends Error {
  override name = 'StoreThreadError';
}

/** Distributes Call over its union so that each op keeps its own fields. */
type Request = Call extends infer C ? (C extends Call ? Omit<C, 'id'> : never) : never;

/**
 * PGlite on a data folder, run in a worker thread of its own.
 *
 * PGlite is PostgreSQL compiled to WebAssembly and runs on the thread that calls it. In the
 * gateway's own thread, the billing journal's store writes (a hundred charges every 100 ms under
 * load) held every request in flight for some 15 ms each time, and cost the request thread 100-240
 * µs of CPU per request (bench/RESULTS.md). Here the request thread only posts the statement and
 * its parameters and reads the rows back (structured clone: bigint, Date and bytes survive it).
 * Transactions keep their semantics: a tx() holds PGlite's connection in the worker until its
 * end call, as the in-thread store does.
 *
 * The lock on the folder (lock.ts) stays with this thread: it is released once the worker has
 * closed PGlite and made its last durable copy.
 */
export class PgliteThreadStore implements Store {
  readonly kind = 'pglite' as const;
  durable?: (urgent?: boolean) => Promise<void>;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  /** Set once the worker is gone: every call fails with it. */
  private gone: StoreThreadError | undefined;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly worker: Worker,
    private readonly lock: DataDirLock,
    private readonly log: Logger | undefined,
    onLost: ((err: Error) => void) | undefined,
  ) {
    // The worker keeps the process alive only while a call waits for it (see call()).
    worker.unref();
    worker.on('message', (r: Reply) => this.receive(r));
    worker.on('error', (err) => this.log?.error('the store thread failed', { error: err.message }));
    worker.on('exit', (code) => {
      const lost = !this.gone;
      this.gone ??= new StoreThreadError(`the store thread exited (code ${code})`);
      for (const p of this.pending.values()) p.reject(this.gone);
      this.pending.clear();
      if (lost) onLost?.(this.gone);
    });
  }

  /** Starts the worker on `dir` (locked by the caller with `lock`) and waits until PGlite is open and migrated. */
  static async open(
    dir: string,
    opts: { snapshotIntervalMs: number; vacuumIntervalMs: number; log?: Logger; onLost?: (err: Error) => void },
    lock: DataDirLock,
  ): Promise<PgliteThreadStore> {
    const worker = startWorker({ dir, snapshotIntervalMs: opts.snapshotIntervalMs, vacuumIntervalMs: opts.vacuumIntervalMs });
    const ready = await new Promise<Extract<Reply, { ready: boolean }>>((resolve, reject) => {
      const onMessage = (r: Reply) => {
        if ('log' in r) return void opts.log?.[r.log](r.msg, r.fields);
        if ('ready' in r) {
          worker.off('message', onMessage);
          worker.off('exit', onExit);
          resolve(r);
        }
      };
      const onExit = (code: number) => reject(new StoreThreadError(`the store thread exited while opening ${dir} (code ${code})`));
      worker.on('message', onMessage);
      worker.on('error', reject);
      worker.on('exit', onExit);
    }).finally(() => worker.removeAllListeners('error'));
    if (!ready.ready) {
      await worker.terminate();
      throw asError(ready.error);
    }
    // What the in-thread store did once PGlite was ready (pglite-options.ts), for this thread's
    // heap: the start's garbage is given back before the first request rather than whenever V8 gets to it.
    setTimeout(collectGarbage, 0).unref();
    const store = new PgliteThreadStore(worker, lock, opts.log, opts.onLost);
    if (ready.durable) store.durable = (urgent) => store.call({ op: 'durable', ...(urgent !== undefined ? { urgent } : {}) }).then(() => {});
    return store;
  }

  async query<R>(sql: string, params?: unknown[]): Promise<QueryResult<R>> {
    return (await this.call({ op: 'query', sql, ...(params ? { params } : {}) })) as QueryResult<R>;
  }

  async tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    // The begin call's id names the transaction in the calls that follow.
    const id = this.nextId++;
    await this.call({ op: 'begin' }, id);
    const q: Queryable = {
      query: async <R>(sql: string, params?: unknown[]) => (await this.call({ op: 'query', sql, tx: id, ...(params ? { params } : {}) })) as QueryResult<R>,
    };
    let value: T;
    try {
      value = await fn(q);
    } catch (err) {
      await this.call({ op: 'end', tx: id, commit: false }).catch(() => {});
      throw err;
    }
    await this.call({ op: 'end', tx: id, commit: true });
    return value;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        if (!this.gone) await this.call({ op: 'close' });
      } finally {
        this.gone ??= new StoreThreadError('the store is closed');
        await this.worker.terminate();
        await this.lock.release();
      }
    })();
    return this.closing;
  }

  private call(req: Request, id = this.nextId++): Promise<unknown> {
    if (this.gone) return Promise.reject(this.gone);
    if (this.pending.size === 0) this.worker.ref();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...req, id });
    });
  }

  private receive(r: Reply): void {
    if ('log' in r) return void this.log?.[r.log](r.msg, r.fields);
    if (!('id' in r)) return;
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (this.pending.size === 0) this.worker.unref();
    if (r.ok) p.resolve(r.value);
    else p.reject(asError(r.error));
  }
}

/** The error the worker sent, with its name and PostgreSQL's fields (code, detail, constraint, ...) back on it. */
function asError(e: ErrorData): Error {
  const err = Object.assign(new Error(e.message), e.fields);
  err.name = e.name;
  // Both threads' frames: where the worker threw it, then the call here that waited for it.
  if (e.stack) err.stack = `${e.stack}\n    --- in the store thread, for:${err.stack?.slice(err.stack.indexOf('\n')) ?? ''}`;
  return err;
}

/** The store thread's name (bench/run.ts counts its CPU by it). */
const PGLITE_THREAD = 'pglite';

/**
 * The worker runs the same build as this thread: compiled JavaScript beside this file (dist/,
 * `npm start`), or, from the TypeScript sources (tests, tsx), those sources through tsx's loader,
 * which a worker thread does not inherit from its parent.
 */
function startWorker(init: WorkerInit): Worker {
  const here = import.meta.url;
  // On Node 24 (not 20) the name is the OS thread's too (top -H, /proc/PID/task): the bench counts its CPU apart.
  const options = { workerData: init, name: PGLITE_THREAD };
  if (here.endsWith('.js')) return new Worker(new URL('./pglite-worker.js', here), options);
  // tsx's ESM entry of its API, from its exports map (the CommonJS one does not load in a worker).
  const manifest = createRequire(here).resolve('tsx/package.json');
  const api = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports: Record<string, { import: { default: string } }> }).exports['./esm/api']!.import.default;
  const tsx = new URL(api, pathToFileURL(manifest)).href;
  const entry = new URL('./pglite-worker.ts', here).href;
  const boot = `const tsx = await import(${JSON.stringify(tsx)}); tsx.register(); await import(${JSON.stringify(entry)});`;
  // A module by URL, not `eval: true`: an eval worker skips the process's --import preloads.
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), options);
}
