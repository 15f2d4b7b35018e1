import { describe, expect, it } from 'vitest';
import { envMillis, envSeconds } from './env.js';

describe('envSeconds', () => {
  it('reads fractional seconds as milliseconds; unset and empty are undefined', () => {
    expect(envSeconds({ T: '1.5' }, 'T')).toBe(1500);
    expect(envSeconds({}, 'T')).toBeUndefined();
    expect(envSeconds({ T: '' }, 'T')).toBeUndefined();
  });

  it('refuses zero, negative and non-numeric values, naming the variable and the value', () => {
    for (const v of ['0', '-2', 'ten', 'Infinity'])
      expect(() => envSeconds({ TOLLGATE_X_SECONDS: v }, 'TOLLGATE_X_SECONDS')).toThrow(`TOLLGATE_X_SECONDS must be a positive number of seconds, got "${v}"`);
  });
});

describe('envMillis', () => {
  it('reads milliseconds, 0 included; unset and empty are undefined; refuses negative and non-numeric values by name', () => {
    expect(envMillis({ T: '0' }, 'T')).toBe(0);
    expect(envMillis({ T: '7.5' }, 'T')).toBe(7.5);
    expect(envMillis({ T: '' }, 'T')).toBeUndefined();
    for (const v of ['-1', 'soon', 'Infinity'])
      expect(() => envMillis({ TOLLGATE_X_MS: v }, 'TOLLGATE_X_MS')).toThrow(`TOLLGATE_X_MS must be a number of milliseconds (0 or more), got "${v}"`);
  });
});
