/**
 * One JSON object per line on stderr, shared by the proxy, the operator and the CLI. Callers pass
 * names and ids, never keys, secret values or credentials.
 */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
  /** Whether a line of this level would be written (so a caller can skip building it). */
  enabled?(level: 'info' | 'warn' | 'error'): boolean;
}

export type LogLevel = 'info' | 'warn' | 'error' | 'silent';

export function createLogger(base: Record<string, unknown> = {}, level: LogLevel = 'info'): Logger {
  const rank = { info: 0, warn: 1, error: 2, silent: 3 }[level] ?? 0;
  const write = (lvl: string, r: number, msg: string, fields?: Record<string, unknown>) => {
    if (r < rank) return;
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...base, ...fields })}\n`);
  };
  return {
    info: (m, f) => write('info', 0, m, f),
    warn: (m, f) => write('warn', 1, m, f),
    error: (m, f) => write('error', 2, m, f),
    child: (f) => createLogger({ ...base, ...f }, level),
    enabled: (lvl) => ({ info: 0, warn: 1, error: 2 })[lvl] >= rank,
  };
}
