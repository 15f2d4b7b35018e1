import { describe, expect, it } from 'vitest';
import { cpuIdle, measuredBy, replaceSection } from './results.js';

const DOC = '# Benchmark results\n\n## Chat overhead\n\nold chat\n\n## Billing\n\nold billing\n';

describe('replaceSection', () => {
  it('replaces a middle section and keeps the ones around it', () => {
    expect(replaceSection(DOC, '## Chat overhead', '## Chat overhead\n\nnew chat\n')).toBe(
      '# Benchmark results\n\n## Chat overhead\n\nnew chat\n\n## Billing\n\nold billing\n',
    );
  });

  it('replaces the last section', () => {
    expect(replaceSection(DOC, '## Billing', '## Billing\n\nnew billing\n')).toBe(
      '# Benchmark results\n\n## Chat overhead\n\nold chat\n\n## Billing\n\nnew billing\n',
    );
  });

  it('appends a section that is not there yet, and does not take a longer heading for it', () => {
    const doc = '# Benchmark results\n\n### Billing\n\nnotes\n';
    expect(replaceSection(doc, '## Billing', '## Billing\n\nfirst\n')).toBe(`${doc}\n## Billing\n\nfirst\n`);
  });

  it('refuses a section holding a second "## " heading, which would split it on the next run', () => {
    expect(() => replaceSection(DOC, '## Chat overhead', '## Chat overhead\n\nfigures\n\n## Instructions per request\n\nnotes\n')).toThrow(
      /holds a heading of its own \("## Instructions per request"\)/,
    );
    expect(replaceSection(DOC, '## Chat overhead', '## Chat overhead\n\n### Notes\n')).toContain('### Notes');
  });

  it('replaces a section at the very start', () => {
    expect(replaceSection('## Operator\n\nold\n\n## Billing\n\nb\n', '## Operator', '## Operator\n\nnew\n')).toBe('## Operator\n\nnew\n\n## Billing\n\nb\n');
  });
});

describe('measuredBy', () => {
  it('names the time, the command and the machine', () => {
    expect(measuredBy('npx tsx bench/x.ts')).toMatch(
      /^Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC by `npx tsx bench\/x\.ts` on \d+ × .+, \d+\.\d GiB, Node v\d+\.\d+\.\d+$/,
    );
  });
});

describe('cpuIdle', () => {
  const files = (f: Record<string, string>) => (path: string) => f[path];

  it("names a KVM guest's halt polling, which one-connection latencies move with", () => {
    expect(
      cpuIdle(files({ '/sys/devices/system/cpu/cpuidle/current_driver': 'haltpoll', '/sys/module/haltpoll/parameters/guest_halt_poll_ns': '200000' })),
    ).toBe('CPU idle driver haltpoll, an idle vCPU polling 200 µs before it halts');
    expect(cpuIdle(files({ '/sys/devices/system/cpu/cpuidle/current_driver': 'haltpoll', '/sys/module/haltpoll/parameters/guest_halt_poll_ns': '0' }))).toBe(
      'CPU idle driver haltpoll, an idle vCPU polling 0 µs before it halts',
    );
  });

  it('names another driver alone, and nothing where the kernel does not say', () => {
    expect(cpuIdle(files({ '/sys/devices/system/cpu/cpuidle/current_driver': 'intel_idle' }))).toBe('CPU idle driver intel_idle');
    expect(cpuIdle(files({}))).toBeUndefined();
  });
});
