import { describe, expect, it } from 'vitest';
import { FailureLog } from './failure-log.js';
import type { Logger } from './log.js';

function recorder(): Logger & { lines: { level: string; msg: string; fields?: Record<string, unknown> }[] } {
  const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push({ level, msg, fields });
  const log = { info: at('info'), warn: at('warn'), error: at('error'), child: () => log, lines };
  return log;
}

describe('FailureLog', () => {
  it('logs an outage as its first failure, a line a minute while it lasts, and its end', () => {
    const log = recorder();
    let now = 1_000;
    const f = new FailureLog(log, 'billing usage rollup fold', 60_000, () => now);
    // Ten minutes of a timer failing every second.
    for (let i = 0; i < 600; i++, now += 1_000) f.failed(new Error('connect ECONNREFUSED'));
    f.succeeded();
    f.succeeded();

    expect(log.lines[0]).toEqual({ level: 'error', msg: 'billing usage rollup fold failed', fields: { error: 'connect ECONNREFUSED' } });
    const still = log.lines.filter((l) => l.msg === 'billing usage rollup fold still failing');
    expect(still).toHaveLength(9);
    expect(still[0]!.fields).toEqual({ error: 'connect ECONNREFUSED', failures: 61, forMs: 60_000 });
    expect(log.lines.at(-1)).toEqual({ level: 'info', msg: 'billing usage rollup fold recovered', fields: { failures: 600, afterMs: 600_000 } });
    expect(log.lines).toHaveLength(11);
  });

  it('logs a different error at once, and a later outage as a new one', () => {
    const log = recorder();
    let now = 0;
    const f = new FailureLog(log, 'tasks: claim', 60_000, () => now);
    f.failed(new Error('connect ECONNREFUSED'));
    now += 1_000;
    f.failed(new Error('connect ECONNREFUSED'));
    now += 1_000;
    f.failed(new Error('password authentication failed'));
    f.succeeded();
    now += 5_000;
    f.failed(new Error('connect ECONNREFUSED'));

    expect(log.lines.map((l) => [l.level, l.msg, l.fields])).toEqual([
      ['error', 'tasks: claim failed', { error: 'connect ECONNREFUSED' }],
      ['error', 'tasks: claim still failing', { error: 'password authentication failed', failures: 3, forMs: 2_000 }],
      ['info', 'tasks: claim recovered', { failures: 3, afterMs: 2_000 }],
      ['error', 'tasks: claim failed', { error: 'connect ECONNREFUSED' }],
    ]);
  });
});
