/**
 * Resolves with the first SIGTERM or SIGINT, for a long-running command to shut down cleanly.
 * Each handler is registered once: a second signal of the same kind gets Node's default (exit).
 */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
}
