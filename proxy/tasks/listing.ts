import { fromMicro } from '../../api/snapshot/money.js';
import { badRequest } from '../../kernel/errors.js';
import type { RequestContext, Route } from '../http/context.js';
import { sendJson } from '../http/send.js';
import type { TasksRuntime } from './http.js';
import { toTask } from './store.js';
import type { TaskRow } from './types.js';

/** Task lists for the consoles: a key's own tasks (API port) and the queue (admin port), newest first. */
const STATUSES = ['queued', 'processing', 'succeeded', 'failed', 'cancelled'];

function filters(ctx: RequestContext): { limit: number; status?: string; kind?: string } {
  const limitRaw = ctx.query.get('limit');
  const limit = limitRaw ? Number(limitRaw) : 20;
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw badRequest('limit must be an integer from 1 to 200', 'limit');
  const status = ctx.query.get('status') || undefined;
  if (status && !STATUSES.includes(status)) throw badRequest(`status must be one of ${STATUSES.join(', ')}`, 'status');
  const kind = ctx.query.get('kind') || undefined;
  if (kind && kind !== 'image' && kind !== 'video') throw badRequest('kind must be image or video', 'kind');
  return { limit, ...(status ? { status } : {}), ...(kind ? { kind } : {}) };
}

async function select(rt: TasksRuntime, ctx: RequestContext, keyHash?: string): Promise<TaskRow[]> {
  const f = filters(ctx);
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, v: unknown) => {
    params.push(v);
    where.push(sql.replace('?', `$${params.length}`));
  };
  if (keyHash) add('key_hash = ?', keyHash);
  if (f.status) add('status = ?', f.status);
  if (f.kind) add('kind = ?', f.kind);
  params.push(f.limit);
  const r = await rt.store.query<Record<string, unknown>>(
    `SELECT * FROM tasks ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
    params,
  );
  return r.rows.map(toTask);
}

export function taskListRoutes(rt: TasksRuntime): { routes: Route[]; adminRoutes: Route[] } {
  return {
    routes: [
      {
        method: 'GET',
        path: '/v1/tasks',
        shape: 'openai',
        auth: 'key',
        handler: async (ctx) => {
          const tasks = await select(rt, ctx, ctx.key!.hash);
          const data = await Promise.all(
            tasks.map(async (t) => ({
              ...(await rt.engine.view(t)),
              kind: t.kind,
              charged: t.chargedMicro === null ? null : fromMicro(t.chargedMicro),
              finished: t.finishedAt ? Math.floor(t.finishedAt.getTime() / 1000) : null,
            })),
          );
          sendJson(ctx.res, 200, { object: 'list', data });
        },
      },
    ],
    adminRoutes: [
      {
        method: 'GET',
        path: '/admin/v1/tasks',
        shape: 'openai',
        auth: 'admin',
        handler: async (ctx) => {
          const tasks = await select(rt, ctx);
          sendJson(ctx.res, 200, {
            data: tasks.map((t) => ({
              id: t.id,
              kind: t.kind,
              mode: t.mode,
              status: t.status,
              model: t.model,
              key: t.keyName,
              account: t.account,
              attempts: t.attempts,
              next_run_at: t.nextRunAt.toISOString(),
              deadline_at: t.deadlineAt.toISOString(),
              held: fromMicro(t.holdMicro),
              charged: t.chargedMicro === null ? null : fromMicro(t.chargedMicro),
              error: t.errorCode ? { code: t.errorCode, message: t.errorMessage ?? '' } : null,
              webhook: t.webhookUrl !== null,
              created_at: t.createdAt.toISOString(),
              finished_at: t.finishedAt?.toISOString() ?? null,
            })),
          });
        },
      },
    ],
  };
}
