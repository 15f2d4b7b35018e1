import { describe, expect, it } from 'vitest';
import { settingsFromEnv } from './settings.js';

describe('task settings from the environment', () => {
  it('reads seconds as milliseconds and names a bad variable', () => {
    expect(settingsFromEnv({ TOLLGATE_TASK_LEASE_SECONDS: '2', TOLLGATE_VIDEO_TASK_TIMEOUT_SECONDS: '90' })).toMatchObject({
      leaseMs: 2000,
      deadlineMs: { image: 600_000, video: 90_000 },
    });
    expect(() => settingsFromEnv({ TOLLGATE_TASK_POLL_SECONDS: 'soon' })).toThrow(
      'TOLLGATE_TASK_POLL_SECONDS must be a positive number of seconds, got "soon"',
    );
  });
});
