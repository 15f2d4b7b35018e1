import { describe, expect, it } from 'vitest';
import { readSettings } from './settings.js';

describe('readSettings', () => {
  it('reads seconds as milliseconds, milliseconds as they are (0 included), and leaves unset or empty variables out', () => {
    const s = readSettings({
      TOLLGATE_BILLING_LEASE_SECONDS: '12',
      TOLLGATE_BILLING_IDLE_SECONDS: '4',
      TOLLGATE_BILLING_SWEEP_SECONDS: '1.5',
      TOLLGATE_BILLING_COMMIT_LINGER_MS: '0',
      TOLLGATE_BILLING_JOURNAL_FLUSH_MS: '',
    });
    expect(s.billing).toEqual({ leaseMs: 12_000, idleMs: 4_000, sweepIntervalMs: 1_500, commitLingerMs: 0 });
    expect(readSettings({}).billing).toEqual({});
    expect(readSettings({ TOLLGATE_BILLING_JOURNAL_DIR: '' }).billing.journalDir).toBeUndefined();
    expect(readSettings({ TOLLGATE_BILLING_JOURNAL_DIR: '/var/lib/tollgate/journal' }).billing.journalDir).toBe('/var/lib/tollgate/journal');
    expect(readSettings({ TOLLGATE_BILLING_JOURNAL_TABLE: 'true' }).billing.journalTable).toBe(true);
    expect(readSettings({ TOLLGATE_BILLING_JOURNAL_TABLE: 'false' }).billing.journalTable).toBe(false);
  });

  it('reads task settings, the webhook schedule and S3', () => {
    const s = readSettings({
      TOLLGATE_TASK_LEASE_SECONDS: '2',
      TOLLGATE_VIDEO_TASK_TIMEOUT_SECONDS: '90',
      TOLLGATE_RESULT_URL_TTL_SECONDS: '3600',
      TOLLGATE_WEBHOOK_RETRY_SCHEDULE: '1, 5,30',
      TOLLGATE_TASK_CONCURRENCY: '3',
      TOLLGATE_TASK_RETRY_ATTEMPTS: '6',
      TOLLGATE_S3_BUCKET: 'results',
      TOLLGATE_S3_FORCE_PATH_STYLE: 'true',
    });
    expect(s.tasks).toEqual({
      leaseMs: 2000,
      videoDeadlineMs: 90_000,
      resultUrlTtlSeconds: 3600,
      webhookRetryScheduleS: [1, 5, 30],
      concurrency: 3,
      upstreamMaxAttempts: 6,
    });
    expect(() => readSettings({ TOLLGATE_TASK_RETRY_ATTEMPTS: '0' })).toThrow('TOLLGATE_TASK_RETRY_ATTEMPTS must be a positive integer, got "0"');
    expect(s.s3).toEqual({ bucket: 'results', forcePathStyle: true });
    expect(readSettings({}).s3).toBeUndefined();
  });

  it('refuses a bad value with the variable named, every bad variable at once', () => {
    for (const bad of ['-1', 'soon', 'Infinity']) {
      expect(() => readSettings({ TOLLGATE_BILLING_COMMIT_LINGER_MS: bad })).toThrow(
        `TOLLGATE_BILLING_COMMIT_LINGER_MS must be a number of milliseconds (0 or more), got "${bad}"`,
      );
    }
    for (const bad of ['0', '-2', 'soon']) {
      expect(() => readSettings({ TOLLGATE_TASK_POLL_SECONDS: bad })).toThrow(`TOLLGATE_TASK_POLL_SECONDS must be a positive number of seconds, got "${bad}"`);
    }
    expect(() => readSettings({ TOLLGATE_TASK_CONCURRENCY: '1.5', TOLLGATE_WEBHOOK_RETRY_SCHEDULE: '1,x' })).toThrow(
      /TOLLGATE_WEBHOOK_RETRY_SCHEDULE must be comma-separated positive seconds, got "1,x".*TOLLGATE_TASK_CONCURRENCY must be a positive integer, got "1.5"|TOLLGATE_TASK_CONCURRENCY must be a positive integer, got "1.5".*TOLLGATE_WEBHOOK_RETRY_SCHEDULE/,
    );
    expect(() => readSettings({ TOLLGATE_LOG_LEVEL: 'loud' })).toThrow('TOLLGATE_LOG_LEVEL must be info, warn, error or silent');
  });

  it('looks up {env: NAME} credentials in the environment captured at start, not later', () => {
    const env: Record<string, string> = { OPENAI_API_KEY: 'sk-one' };
    const s = readSettings(env);
    env.OPENAI_API_KEY = 'sk-two';
    expect(s.secretFromEnv('OPENAI_API_KEY')).toBe('sk-one');
    expect(s.secretFromEnv('MISSING')).toBeUndefined();
  });
});
