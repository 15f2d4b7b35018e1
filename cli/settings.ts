import { readSettings, SettingsError, type Settings } from '../kernel/settings.js';
import { UsageError } from './args.js';

/** The process's settings; a bad variable is a usage error naming it (exit 2), not a stack trace. */
export function readSettingsOrExit(env: NodeJS.ProcessEnv): Settings {
  try {
    return readSettings(env);
  } catch (err) {
    if (err instanceof SettingsError) throw new UsageError(err.message);
    throw err;
  }
}
