import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Real, so logs name the checkout's folder when this runs from `npm start`'s build (scripts/start.js links examples/ there).
export const QUICKSTART_DIR = realpathSync(fileURLToPath(new URL('../examples/quickstart/', import.meta.url)));

/**
 * Standalone ApiKey manifests: the folders the gateway reads them from, and the one new keys
 * go to. The quickstart keeps user-made keys in its data folder, out of the tracked examples/;
 * `--config DIR` keeps them in DIR/keys, read and watched with the rest of DIR.
 */
export function standaloneKeys(quickstart: boolean, configDir: string | undefined, dataDir: string | undefined): { dirs: string[]; writeDir: string } {
  if (quickstart) {
    const writeDir = join(dataDir ?? '.tollgate', 'keys');
    return { dirs: [QUICKSTART_DIR, writeDir], writeDir };
  }
  return { dirs: [configDir!], writeDir: join(configDir!, 'keys') };
}
