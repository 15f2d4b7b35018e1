import type { CompiledBackend } from './types.js';

/**
 * The backend's credential at call time: a resolved value (operator), or an environment variable
 * read now (standalone), so rotating the variable needs no config reload. None -> no auth header.
 */
export function credentialOf(backend: CompiledBackend): string | undefined {
  const c = backend.credential;
  if (!c) return undefined;
  if ('value' in c) return c.value || undefined;
  return process.env[c.env] || undefined;
}
