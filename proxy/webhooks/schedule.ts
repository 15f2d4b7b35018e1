/**
 * Webhook retry schedule: the delay before each retry, in seconds. Exponential (x4 from 10 s),
 * capped at 6 h: 10 s, 40 s, 2 min 40 s, 10 min 40 s, 42 min 40 s, 2 h 50 min 40 s, 6 h —
 * 8 attempts over about 9 h 48 min, after which the delivery is marked failed.
 */
export const DEFAULT_RETRY_SCHEDULE_S: readonly number[] = [10, 40, 160, 640, 2560, 10240, 21600];

/** Milliseconds to wait after `failedAttempts` failures, or undefined when the schedule is spent. */
export function retryDelayMs(scheduleSeconds: readonly number[], failedAttempts: number): number | undefined {
  const s = scheduleSeconds[failedAttempts - 1];
  return s === undefined ? undefined : Math.round(s * 1000);
}
