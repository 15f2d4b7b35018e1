import { parseArgs, type ParseArgsConfig } from 'node:util';

/** A bad command line: main prints the one-line message and exits 2. */
export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * Strict flag parsing shared by every command: unknown flags and missing values are a
 * UsageError; --help is always accepted.
 */
export function parseFlags<O extends Options>(argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals });
  } catch (err) {
    throw new UsageError((err as Error).message.split('\n')[0]);
  }
}

/** A flag that must be a TCP port. */
export function portFlag(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`--${name} must be a port number (0-65535), got "${value}"`);
  return n;
}

/** A flag that must be a whole number of `unit`, at least `min`; undefined when it is absent. */
export function wholeFlag(name: string, value: string | undefined, unit: string, min = 0): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new UsageError(`--${name} must be a whole number of ${unit}${min > 0 ? ` (at least ${min})` : ''}, got "${value}"`);
  return n;
}
