import { envSeconds as seconds } from '../config/env.js';
import { DEFAULT_RETRY_SCHEDULE_S } from '../webhooks/schedule.js';
import type { TaskKind } from './types.js';

/** Tunables of the task engine and webhook delivery; defaults, then environment, then code. */
export interface TaskSettings {
  /** A claimed task is leased this long and renewed every third of it while it is worked on. */
  leaseMs: number;
  /** Upstream poll interval for asynchronous providers. */
  pollIntervalMs: number;
  /** Backoff of upstream submissions refused with 429/5xx or unreachable: base x 2^attempt, capped. */
  submitBackoffBaseMs: number;
  submitBackoffMaxMs: number;
  /** A task not finished this long after submission fails and is refunded. */
  deadlineMs: Record<TaskKind, number>;
  /** How long result URLs (signed or presigned) stay valid. At most 7 days (S3's own limit). */
  resultUrlTtlSeconds: number;
  webhookRetryScheduleS: readonly number[];
  webhookTimeoutMs: number;
  /** Tasks this replica works on at once. */
  concurrency: number;
  /** Largest input media file the gateway downloads for a provider (edits upload inputs). */
  mediaMaxBytes: number;
  /** Largest result file copied into storage. */
  resultMaxBytes: number;
  /** On shutdown, work in flight may finish for this long before it is aborted (and picked up again later). */
  stopGraceMs: number;
}

export const DEFAULT_SETTINGS: TaskSettings = {
  leaseMs: 30_000,
  pollIntervalMs: 2_000,
  submitBackoffBaseMs: 2_000,
  submitBackoffMaxMs: 60_000,
  deadlineMs: { image: 10 * 60_000, video: 60 * 60_000 },
  resultUrlTtlSeconds: 24 * 3600,
  webhookRetryScheduleS: DEFAULT_RETRY_SCHEDULE_S,
  webhookTimeoutMs: 10_000,
  concurrency: 8,
  mediaMaxBytes: 50 * 1024 * 1024,
  resultMaxBytes: 2 * 1024 * 1024 * 1024,
  stopGraceMs: 10_000,
};

/** TOLLGATE_* overrides (README "Images": settings). A bad value stops the start with its name. */
export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Partial<TaskSettings> {
  const out: Partial<TaskSettings> = {};
  const lease = seconds(env, 'TOLLGATE_TASK_LEASE_SECONDS');
  if (lease) out.leaseMs = lease;
  const poll = seconds(env, 'TOLLGATE_TASK_POLL_SECONDS');
  if (poll) out.pollIntervalMs = poll;
  const backoff = seconds(env, 'TOLLGATE_TASK_RETRY_SECONDS');
  if (backoff) out.submitBackoffBaseMs = backoff;
  const image = seconds(env, 'TOLLGATE_IMAGE_TASK_TIMEOUT_SECONDS');
  const video = seconds(env, 'TOLLGATE_VIDEO_TASK_TIMEOUT_SECONDS');
  if (image || video) out.deadlineMs = { ...DEFAULT_SETTINGS.deadlineMs, ...(image ? { image } : {}), ...(video ? { video } : {}) };
  const ttl = seconds(env, 'TOLLGATE_RESULT_URL_TTL_SECONDS');
  if (ttl) out.resultUrlTtlSeconds = Math.round(ttl / 1000);
  const timeout = seconds(env, 'TOLLGATE_WEBHOOK_TIMEOUT_SECONDS');
  if (timeout) out.webhookTimeoutMs = timeout;
  const schedule = env.TOLLGATE_WEBHOOK_RETRY_SCHEDULE;
  if (schedule !== undefined && schedule !== '') {
    const list = schedule.split(',').map((s) => Number(s.trim()));
    if (list.some((n) => !Number.isFinite(n) || n <= 0)) {
      throw new Error(`TOLLGATE_WEBHOOK_RETRY_SCHEDULE must be comma-separated positive seconds, got "${schedule}"`);
    }
    out.webhookRetryScheduleS = list;
  }
  const conc = env.TOLLGATE_TASK_CONCURRENCY;
  if (conc !== undefined && conc !== '') {
    const n = Number(conc);
    if (!Number.isInteger(n) || n < 1) throw new Error(`TOLLGATE_TASK_CONCURRENCY must be a positive integer, got "${conc}"`);
    out.concurrency = n;
  }
  return out;
}

export function resolveSettings(...layers: Partial<TaskSettings>[]): TaskSettings {
  const s = Object.assign({}, DEFAULT_SETTINGS, ...layers) as TaskSettings;
  if (s.resultUrlTtlSeconds > 7 * 24 * 3600) throw new Error('result URL lifetime is at most 7 days (604800 s)');
  return s;
}

/** S3 result storage from TOLLGATE_S3_* when the gateway options carry none. */
export function s3FromEnv(env: NodeJS.ProcessEnv = process.env) {
  const bucket = env.TOLLGATE_S3_BUCKET;
  if (!bucket) return undefined;
  return {
    bucket,
    ...(env.TOLLGATE_S3_REGION ? { region: env.TOLLGATE_S3_REGION } : {}),
    ...(env.TOLLGATE_S3_ENDPOINT ? { endpoint: env.TOLLGATE_S3_ENDPOINT } : {}),
    ...(env.TOLLGATE_S3_PREFIX ? { prefix: env.TOLLGATE_S3_PREFIX } : {}),
    ...(env.TOLLGATE_S3_FORCE_PATH_STYLE === 'true' || env.TOLLGATE_S3_FORCE_PATH_STYLE === '1' ? { forcePathStyle: true } : {}),
  };
}
