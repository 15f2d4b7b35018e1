import { describe, expect, it } from 'vitest';
import { decideStream } from './stream-mode.js';

describe('decideStream', () => {
  it('an explicit stream wins over Accept', () => {
    expect(decideStream(true, 'application/json')).toBe(true);
    expect(decideStream(false, 'text/event-stream')).toBe(false);
  });
  it('absent stream: streams unless Accept asks only for JSON', () => {
    expect(decideStream(undefined, undefined)).toBe(true);
    expect(decideStream(undefined, '*/*')).toBe(true);
    expect(decideStream(undefined, 'text/event-stream')).toBe(true);
    expect(decideStream(undefined, 'application/json, text/event-stream')).toBe(true);
    expect(decideStream(undefined, 'application/json')).toBe(false);
    expect(decideStream(undefined, 'Application/JSON; charset=utf-8')).toBe(false);
  });
});
