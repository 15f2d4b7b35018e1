/**
 * A positive number of seconds from an environment variable, in milliseconds; unset or empty is
 * undefined. A bad value throws with the variable's name, so a misconfigured start stops early.
 */
export function envSeconds(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number of seconds, got "${v}"`);
  return n * 1000;
}

/** Milliseconds (0 or more) from an environment variable; unset or empty is undefined; a bad value throws with the name. */
export function envMillis(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number of milliseconds (0 or more), got "${v}"`);
  return n;
}
