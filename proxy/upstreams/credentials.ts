import type { CompiledBackend } from './types.js';

/**
 * The backend's credential at call time: a resolved value (operator), or an environment variable
 * of the process (standalone), looked up through the settings read at start. None -> no auth header.
 */
export function credentialOf(backend: CompiledBackend, secretFromEnv: (name: string) => string | undefined): string | undefined {
  const c = backend.credential;
  if (!c) return undefined;
  if ('value' in c) return c.value || undefined;
  return secretFromEnv(c.env);
}
