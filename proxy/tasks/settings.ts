import type { Settings } from '../../kernel/settings.js';
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
  /**
   * Calls to the upstream in a row that may fail with 429, 5xx or no answer before the task fails
   * with the last one's code and message (refunded): submissions, and polls of a created task.
   */
  upstreamMaxAttempts: number;
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
  upstreamMaxAttempts: 4,
  deadlineMs: { image: 10 * 60_000, video: 60 * 60_000 },
  resultUrlTtlSeconds: 24 * 3600,
  webhookRetryScheduleS: DEFAULT_RETRY_SCHEDULE_S,
  webhookTimeoutMs: 10_000,
  concurrency: 8,
  mediaMaxBytes: 50 * 1024 * 1024,
  resultMaxBytes: 2 * 1024 * 1024 * 1024,
  stopGraceMs: 10_000,
};

/** The environment's task settings (kernel/settings.ts) in the engine's terms. */
export function settingsFrom(env: Settings['tasks']): Partial<TaskSettings> {
  const { imageDeadlineMs: image, videoDeadlineMs: video, ...rest } = env;
  return image || video ? { ...rest, deadlineMs: { ...DEFAULT_SETTINGS.deadlineMs, ...(image ? { image } : {}), ...(video ? { video } : {}) } } : rest;
}

export function resolveSettings(...layers: Partial<TaskSettings>[]): TaskSettings {
  const s = Object.assign({}, DEFAULT_SETTINGS, ...layers) as TaskSettings;
  if (s.resultUrlTtlSeconds > 7 * 24 * 3600) throw new Error('result URL lifetime is at most 7 days (604800 s)');
  return s;
}
