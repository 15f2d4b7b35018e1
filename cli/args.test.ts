import { describe, expect, it } from 'vitest';
import { portFlag, UsageError, wholeFlag } from './args.js';

describe('numeric flags', () => {
  it('portFlag: absent is the default; 0-65535 pass; anything else is a usage error naming the flag', () => {
    expect(portFlag('port', undefined, 8080)).toBe(8080);
    expect(portFlag('port', '0', 8080)).toBe(0);
    expect(() => portFlag('port', '65536', 8080)).toThrow(new UsageError('--port must be a port number (0-65535), got "65536"'));
  });

  it('wholeFlag: absent is undefined; whole numbers from min pass; fractions, words and smaller numbers are usage errors', () => {
    expect(wholeFlag('debounce-ms', undefined, 'milliseconds')).toBeUndefined();
    expect(wholeFlag('debounce-ms', '0', 'milliseconds')).toBe(0);
    expect(wholeFlag('body-limit', '1024', 'bytes', 1)).toBe(1024);
    expect(() => wholeFlag('body-limit', '0', 'bytes', 1)).toThrow(new UsageError('--body-limit must be a whole number of bytes (at least 1), got "0"'));
    expect(() => wholeFlag('latency', '1.5', 'milliseconds')).toThrow(new UsageError('--latency must be a whole number of milliseconds, got "1.5"'));
    expect(() => wholeFlag('latency', 'soon', 'milliseconds')).toThrow(UsageError);
  });
});
