import { describe, expect, it } from 'vitest';
import { billingSettings, DEFAULT_BILLING_SETTINGS } from './settings.js';

describe('billingSettings', () => {
  it('reads the commit linger in milliseconds, 0 included, and leaves the default when unset or empty', () => {
    expect(billingSettings({ TOLLGATE_BILLING_COMMIT_LINGER_MS: '0' }).commitLingerMs).toBe(0);
    expect(billingSettings({ TOLLGATE_BILLING_COMMIT_LINGER_MS: '7.5' }).commitLingerMs).toBe(7.5);
    expect(billingSettings({}).commitLingerMs).toBe(DEFAULT_BILLING_SETTINGS.commitLingerMs);
    expect(billingSettings({ TOLLGATE_BILLING_COMMIT_LINGER_MS: '' }).commitLingerMs).toBe(DEFAULT_BILLING_SETTINGS.commitLingerMs);
  });

  it('refuses a linger that is not a number of milliseconds, naming the variable', () => {
    for (const bad of ['-1', 'soon', 'Infinity']) {
      expect(() => billingSettings({ TOLLGATE_BILLING_COMMIT_LINGER_MS: bad })).toThrow(/TOLLGATE_BILLING_COMMIT_LINGER_MS .*"/);
    }
  });

  it('reads the journal directory and its flush interval; without a directory there is no journal', () => {
    const s = billingSettings({ TOLLGATE_BILLING_JOURNAL_DIR: '/var/lib/tollgate/journal', TOLLGATE_BILLING_JOURNAL_FLUSH_MS: '40' });
    expect([s.journalDir, s.journalFlushMs]).toEqual(['/var/lib/tollgate/journal', 40]);
    expect(billingSettings({ TOLLGATE_BILLING_JOURNAL_DIR: '' }).journalDir).toBeUndefined();
    expect(() => billingSettings({ TOLLGATE_BILLING_JOURNAL_FLUSH_MS: 'later' })).toThrow(/TOLLGATE_BILLING_JOURNAL_FLUSH_MS .*"later"/);
  });

  it('reads lease, idle and sweep periods in seconds, and code overrides win', () => {
    const s = billingSettings(
      { TOLLGATE_BILLING_LEASE_SECONDS: '12', TOLLGATE_BILLING_IDLE_SECONDS: '4', TOLLGATE_BILLING_SWEEP_SECONDS: '2' },
      { idleMs: 100 },
    );
    expect([s.leaseMs, s.idleMs, s.sweepIntervalMs]).toEqual([12_000, 100, 2_000]);
  });
});
