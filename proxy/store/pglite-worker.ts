import { parentPort, workerData } from 'node:worker_threads';
import type { Logger } from '../../kernel/log.js';
import { openFolder } from './folder.js';
import type { PgliteStore } from './pglite.js';
import type { Queryable } from './types.js';

/**
 * The worker thread PGlite runs in when it holds a data folder (pglite-thread.ts says why). It
 * opens the folder as the gateway's own thread would (folder.ts) and answers the calls of the
 * Store in front of it, one message each way.
 */

export interface WorkerInit {
  dir: string;
  snapshotIntervalMs: number;
  vacuumIntervalMs: number;
}

export type Call =
  | { id: number; op: 'query'; sql: string; params?: unknown[]; tx?: number }
  | { id: number; op: 'begin' }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'durable'; urgent?: boolean }
  | { id: number; op: 'close' };

/** An error as it crosses the thread: its message, name and PostgreSQL's fields (code, detail, ...). */
export interface ErrorData {
  message: string;
  name: string;
  /** Where it was thrown in the worker. */
  stack?: string;
  fields: Record<string, string | number | boolean>;
}

export type Reply =
  | { id: number; ok: true; value?: unknown }
  | { id: number; ok: false; error: ErrorData }
  | { ready: true; durable: boolean }
  | { ready: false; error: ErrorData }
  | { log: 'info' | 'warn' | 'error'; msg: string; fields?: Record<string, unknown> };

export function errorData(err: unknown): ErrorData {
  if (!(err instanceof Error)) return { message: typeof err === 'string' ? err : JSON.stringify(err), name: 'Error', fields: {} };
  const fields: ErrorData['fields'] = {};
  for (const [k, v] of Object.entries(err)) if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') fields[k] = v;
  return { message: err.message, name: err.name, ...(err.stack ? { stack: err.stack } : {}), fields };
}

/** Ends a transaction's callback without committing it. */
class Rollback extends Error {}

function serve(port: NonNullable<typeof parentPort>, init: WorkerInit): void {
  const send = (r: Reply) => port.postMessage(r);
  const log: Logger = {
    info: (msg, fields) => send({ log: 'info', msg, ...(fields ? { fields } : {}) }),
    warn: (msg, fields) => send({ log: 'warn', msg, ...(fields ? { fields } : {}) }),
    error: (msg, fields) => send({ log: 'error', msg, ...(fields ? { fields } : {}) }),
    child: () => log,
  };
  /** Open transactions by their begin call's id: the queries' Queryable and how to end them. */
  const open = new Map<number, { q: Queryable; end: (commit: boolean, id: number) => void }>();
  let store: PgliteStore | undefined;

  const answer = (id: number, work: () => Promise<unknown>) =>
    work().then(
      (value) => send({ id, ok: true, value }),
      (err: unknown) => send({ id, ok: false, error: errorData(err) }),
    );

  const handle = (c: Call) => {
    const s = store!;
    switch (c.op) {
      case 'query': {
        const q = c.tx === undefined ? s : open.get(c.tx)?.q;
        if (!q) return send({ id: c.id, ok: false, error: errorData(new Error(`transaction ${c.tx} is not open`)) });
        return void answer(c.id, () => q.query(c.sql, c.params));
      }
      case 'begin': {
        let endId = -1;
        s.tx(
          (q) =>
            new Promise<void>((resolve, reject) => {
              open.set(c.id, {
                q,
                end: (commit, id) => {
                  endId = id;
                  open.delete(c.id);
                  if (commit) resolve();
                  else reject(new Rollback());
                },
              });
              send({ id: c.id, ok: true });
            }),
        ).then(
          () => send({ id: endId, ok: true }),
          (err: unknown) => {
            // Refused before it began (the store closed): the begin call is the one waiting.
            if (endId === -1) return send({ id: c.id, ok: false, error: errorData(err) });
            send(err instanceof Rollback ? { id: endId, ok: true } : { id: endId, ok: false, error: errorData(err) });
          },
        );
        return;
      }
      case 'end': {
        const t = open.get(c.tx);
        if (!t) return send({ id: c.id, ok: false, error: errorData(new Error(`transaction ${c.tx} is not open`)) });
        return t.end(c.commit, c.id);
      }
      case 'durable':
        return void answer(c.id, async () => {
          if (!s.durable) throw new Error('this store keeps no durable copies');
          await s.durable(c.urgent);
        });
      case 'close':
        return void answer(c.id, () => s.close());
    }
  };

  port.on('message', handle);
  openFolder(init.dir, { snapshotIntervalMs: init.snapshotIntervalMs, vacuumIntervalMs: init.vacuumIntervalMs, log }).then(
    (s) => {
      store = s;
      send({ ready: true, durable: s.durable !== undefined });
    },
    (err: unknown) => send({ ready: false, error: errorData(err) }),
  );
}

if (parentPort) serve(parentPort, workerData as WorkerInit);
