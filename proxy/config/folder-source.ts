import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { compile, formatCompileError, type CompileError, type GatewayConfig, type RawResource } from '../../api/snapshot/index.js';
import type { Logger } from '../../kernel/log.js';
import { Listeners } from './listeners.js';
import { emptiedBy } from './safety.js';
import type { ConfigSource } from './source.js';

/** Reads every *.yaml / *.yml below a folder (multi-document), parse errors named by file and document. */
export async function loadManifests(
  dirOrDirs: string | readonly string[],
  rewrite?: (text: string) => string,
): Promise<{ resources: RawResource[]; errors: CompileError[] }> {
  const resources: RawResource[] = [];
  const errors: CompileError[] = [];
  const paths: string[] = [];
  for (const dir of typeof dirOrDirs === 'string' ? [dirOrDirs] : dirOrDirs) {
    for (const f of (await readdir(dir, { recursive: true })).filter((f) => /\.ya?ml$/i.test(f)).sort()) {
      const path = join(dir, f);
      if (!paths.includes(path)) paths.push(path);
    }
  }
  for (const path of paths) {
    const read = await readFile(path, 'utf8');
    const text = rewrite ? rewrite(read) : read;
    const docs = parseAllDocuments(text);
    const list = Array.isArray(docs) ? docs : [docs];
    list.forEach((doc, i) => {
      const source = `${relative(process.cwd(), path) || path}#${i + 1}`;
      if (doc.errors.length > 0) {
        errors.push({ kind: '(yaml)', name: '(document)', source, field: '(root)', message: doc.errors[0]!.message.split('\n')[0]! });
        return;
      }
      const object = doc.toJS() as unknown;
      if (object === null || object === undefined) return; // an empty document between ---
      resources.push({ object, source });
    });
  }
  return { resources, errors };
}

/**
 * Standalone config: the manifests of a folder, recompiled on every change. A change that does
 * not compile cleanly is logged and the last good config stays in service; the first load serves
 * whatever compiles so that one bad file does not keep the gateway down.
 */
export class FolderConfigSource implements ConfigSource {
  private config: GatewayConfig | undefined;
  private readonly listeners = new Listeners<GatewayConfig>();
  private readonly rejections = new Listeners<string>();
  private watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private loading: Promise<void> = Promise.resolve();
  lastErrors: CompileError[] = [];

  private readonly dirs: readonly string[];

  /** `dir`: the config folder, or several (standalone keys may live in a folder of their own). */
  constructor(
    dir: string | readonly string[],
    private readonly log: Logger,
    /** rewrite: applied to each file's text before it is parsed (the quickstart's simulator address on another port). */
    private readonly opts: { watch?: boolean; debounceMs?: number; rewrite?: (text: string) => string } = {},
  ) {
    this.dirs = typeof dir === 'string' ? [dir] : dir;
  }

  current(): GatewayConfig | undefined {
    return this.config;
  }

  /** The errors of the last load: resources left out of the config in service, or the change refused. */
  problems(): CompileError[] {
    return this.lastErrors;
  }

  onUpdate(listener: (config: GatewayConfig) => void): () => void {
    return this.listeners.add(listener);
  }

  onReject(listener: (reason: string) => void): () => void {
    return this.rejections.add(listener);
  }

  async start(): Promise<void> {
    await this.reload();
    if (this.opts.watch === false) return;
    for (const dir of this.dirs) {
      const watcher = watch(dir, { recursive: true }, () => {
        clearTimeout(this.timer);
        this.timer = setTimeout(() => {
          this.loading = this.loading.then(() => this.reload());
        }, this.opts.debounceMs ?? 100);
      });
      watcher.on('error', (err) => this.log.warn('config watch failed', { dir, error: err.message }));
      this.watchers.push(watcher);
    }
  }

  /** Loads, compiles and swaps (or keeps the last good config). Exposed for tests and SIGHUP. */
  async reload(): Promise<void> {
    let loaded;
    try {
      loaded = await loadManifests(this.dirs, this.opts.rewrite);
    } catch (err) {
      this.log.error('config folder unreadable; keeping the config in service', { dirs: this.dirs, error: (err as Error).message });
      return;
    }
    const { config, errors } = compile(loaded.resources);
    this.lastErrors = [...loaded.errors, ...errors];
    for (const e of this.lastErrors) this.log.error('config error', { error: formatCompileError(e) });
    if (this.config && this.lastErrors.length > 0) {
      this.log.error('config change rejected; the last good config stays in service', { version: this.config.version, errors: this.lastErrors.length });
      this.rejections.emit(`${this.lastErrors.length} error(s)`);
      return;
    }
    if (this.config?.version === config.version) return;
    const emptied = emptiedBy(this.config, config);
    if (emptied) {
      this.log.error('config change rejected; the last good config stays in service', { version: this.config!.version, reason: emptied });
      this.rejections.emit(emptied);
      return;
    }
    this.config = config;
    this.log.info('config loaded', {
      version: config.version,
      models: Object.keys(config.models).length,
      groups: Object.keys(config.groups).length,
      keys: Object.keys(config.keys).length,
    });
    this.listeners.emit(config);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    for (const w of this.watchers) w.close();
    await this.loading;
  }
}

/** A config set in code: tests and embedding. */
export class StaticConfigSource implements ConfigSource {
  private readonly listeners = new Listeners<GatewayConfig>();
  constructor(private config?: GatewayConfig) {}
  current(): GatewayConfig | undefined {
    return this.config;
  }
  set(config: GatewayConfig): void {
    this.config = config;
    this.listeners.emit(config);
  }
  onUpdate(listener: (config: GatewayConfig) => void): () => void {
    return this.listeners.add(listener);
  }
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
}
