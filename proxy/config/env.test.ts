import { describe, expect, it } from 'vitest';
import { envSeconds } from './env.js';

describe('envSeconds', () => {
  it('reads fractional seconds as milliseconds; unset and empty are undefined', () => {
    expect(envSeconds({ T: '1.5' }, 'T')).toBe(1500);
    expect(envSeconds({}, 'T')).toBeUndefined();
    expect(envSeconds({ T: '' }, 'T')).toBeUndefined();
  });

  it('refuses zero, negative and non-numeric values, naming the variable and the value', () => {
    for (const v of ['0', '-2', 'ten', 'Infinity']) expect(() => envSeconds({ TOLLGATE_X_SECONDS: v }, 'TOLLGATE_X_SECONDS')).toThrow(`TOLLGATE_X_SECONDS must be a positive number of seconds, got "${v}"`);
  });
});
