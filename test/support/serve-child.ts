import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openStore, type Store } from '../../proxy/store/index.js';
import { PgliteStore } from '../../proxy/store/pglite.js';
import { startCli } from './cli.js';

/**
 * `tollgate serve` as a child process on a database that outlives it, for tests that kill the
 * process with SIGKILL and start it again on the same data.
 */
export interface ServeTarget {
  /** serve flags naming the database. */
  flags: string[];
  /** The child's environment: PGlite's must not inherit DATABASE_URL (serve would prefer it over --data). */
  env: Record<string, string>;
  /** Opens the database from this process (PGlite: only while no child has it open). */
  open(): Promise<Store>;
  dispose(): Promise<void>;
}

export function pgliteTarget(dir: string): ServeTarget {
  return {
    flags: ['--data', dir],
    env: { DATABASE_URL: '' },
    open: async () => {
      const s = new PgliteStore(join(dir, 'pg'));
      await migrate(s);
      return s;
    },
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

/** A fresh schema on PostgreSQL; the child reaches it through the URL's search_path. */
export function postgresTarget(url: string): ServeTarget {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const open = () => openStore({ databaseUrl: url, schema });
  const withPath = `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  return {
    flags: ['--database-url', withPath],
    env: {},
    open,
    dispose: async () => {
      const s = await open();
      await s.query(`DROP SCHEMA "${schema}" CASCADE`);
      await s.close();
    },
  };
}

/** PGlite in a new folder named after `tmpPrefix` always; PostgreSQL when DATABASE_URL is set (as in storeCases). */
export function serveTargets(tmpPrefix: string): { name: 'pglite' | 'postgres'; make: () => Promise<ServeTarget> }[] {
  const targets: { name: 'pglite' | 'postgres'; make: () => Promise<ServeTarget> }[] = [
    { name: 'pglite', make: async () => pgliteTarget(await mkdtemp(join(tmpdir(), tmpPrefix))) },
  ];
  const url = process.env.DATABASE_URL;
  if (url) targets.push({ name: 'postgres', make: async () => postgresTarget(url) });
  return targets;
}

/** Writes manifests into one YAML file (JSON is YAML) of a new folder, as a user would; returns the folder. */
export async function writeManifests(docs: object[], tmpPrefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), tmpPrefix));
  await writeFile(join(dir, 'manifests.yaml'), docs.map((d) => JSON.stringify(d)).join('\n---\n'));
  return dir;
}

export interface ServeChild {
  child: ChildProcess;
  /** The API's base URL, from the "gateway listening" log line. */
  url: string;
  adminUrl: string;
  exited: Promise<number | null>;
}

/** Starts `tollgate serve --config DIR` on ephemeral ports against a target; resolves once it listens. */
export async function serveChild(t: ServeTarget, configDir: string, o: { args?: string[]; env?: Record<string, string> } = {}): Promise<ServeChild> {
  const { child, match, exited } = await startCli(
    ['serve', '--config', configDir, '--port', '0', '--admin-port', '0', ...(o.args ?? []), ...t.flags],
    (l) => l.msg === 'gateway listening',
    { ...o.env, ...t.env },
    60_000,
  );
  return { child, url: match.api as string, adminUrl: match.admin as string, exited };
}
