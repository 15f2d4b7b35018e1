import {
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
  type BigIntStats,
} from 'node:fs';
import { open } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/**
 * Durable states of an embedded store's folder. PGlite (0.5) never calls fsync: what it writes
 * stays in the page cache until the kernel gets to it, in no particular order, so after a power
 * loss or a kernel crash its folder may hold any mix of old and new blocks — a WAL without the
 * records its data pages depend on, a pg_control newer than its WAL. PostgreSQL's recovery
 * cannot repair that. What a crash of the process leaves (SIGKILL, OOM) is another matter: the
 * page cache survives it, and PostgreSQL recovers from it as it does from any crash.
 *
 * So the live folder is trusted only in the boot that wrote it, and a copy is made durable every
 * few seconds: with no query running (PGlite runs one at a time), the files that changed since
 * the last copy are copied (in the kernel: copy_file_range) into a new folder, the unchanged ones
 * hard-linked from the last copy; then, with queries running again, every new file and folder is
 * fsynced and the folder renamed into place and its parent fsynced. A copy taken between two
 * queries is what a process crash at that moment would leave, so PostgreSQL opens it the same
 * way. Old copies are deleted once a newer one is durable.
 *
 * At start (prepareLiveDir), the live folder is used when it was last opened in this boot (the
 * kernel's boot id, kept beside it): the process crashed or stopped, the machine did not. Else,
 * when a durable copy exists, the live folder is moved aside and the copy restored in its place.
 * Whatever the store took after that copy and that must not be lost (charges) is in the billing
 * journal, whose segments are kept until a copy that includes them is durable, and replayed.
 */

/** The folder of durable copies beside a live folder, and the boot marker. */
export const snapshotsOf = (live: string) => `${live}.durable`;
const markerOf = (live: string) => `${live}.boot`;
const asidePath = (live: string) => `${live}.previous`;

/** The kernel's id of this boot (Linux); undefined where there is none to read. */
export function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The newest complete copy (folders named by a sequence number; ".tmp" ones are unfinished). */
export function latestSnapshot(live: string): string | undefined {
  const root = snapshotsOf(live);
  if (!existsSync(root)) return undefined;
  const done = readdirSync(root)
    .filter((n) => /^\d+$/.test(n))
    .sort();
  const last = done.at(-1);
  return last === undefined ? undefined : join(root, last);
}

export type LiveDirState = 'new' | 'live' | 'restored';

/** What the last durable copy holds, as the live folder's files were when it was made (so the next copy links what did not change). */
export interface CopyState {
  dir: string;
  files: Map<string, FileState>;
  atNs: bigint;
}

/**
 * Decides what the store opens: the live folder (new, or written in this boot) or, after a
 * machine crash, the last durable copy restored in its place. `force` restores even in this boot
 * (the live folder did not open). `last` describes the last copy, when known.
 */
export function prepareLiveDir(live: string, force = false): { state: LiveDirState; last?: CopyState } {
  const snap = latestSnapshot(live);
  if (snap === undefined) return { state: existsSync(live) ? 'live' : 'new' };
  const boot = bootId();
  let marked: string | undefined;
  try {
    marked = readFileSync(markerOf(live), 'utf8').trim();
  } catch {
    marked = undefined;
  }
  // Without a boot id (not Linux) nothing says the machine crashed: the live folder is used.
  if (!force && existsSync(live) && (boot === undefined || marked === boot)) return { state: 'live', last: readManifest(snap) };
  // From here until the marker is written again, a crash leads back here.
  rmSync(markerOf(live), { force: true });
  rmSync(asidePath(live), { recursive: true, force: true });
  if (existsSync(live)) renameSync(live, asidePath(live));
  const files = new Map<string, FileState>();
  copyTree(snap, `${live}.restoring`, '', files);
  renameSync(`${live}.restoring`, live);
  return { state: 'restored', last: { dir: snap, files, atNs: BigInt(Date.now()) * 1_000_000n } };
}

/** The live folder opened in this boot: a process crash from here on leaves it usable. */
export function markLiveDir(live: string): void {
  const boot = bootId();
  if (boot !== undefined) writeFileSync(markerOf(live), boot);
}

const MANIFEST = 'MANIFEST.json';

/**
 * Copies a durable copy back (never links: the store writes its files in place, and the copy
 * must not change). Each file keeps the copy's mtime, so the next durable copy can tell the
 * files the store has not written since (`files`: their state now) and link them instead.
 */
function copyTree(from: string, to: string, rel: string, files: Map<string, FileState>): void {
  rmSync(to, { recursive: true, force: true });
  mkdirSync(to, { recursive: true });
  for (const e of readdirSync(from, { withFileTypes: true })) {
    if (rel === '' && e.name === MANIFEST) continue;
    const a = join(from, e.name);
    const b = join(to, e.name);
    const r = rel ? join(rel, e.name) : e.name;
    if (e.isDirectory()) copyTree(a, b, r, files);
    else if (e.isFile()) {
      copyFileSync(a, b);
      const src = statSync(a);
      utimesSync(b, src.atime, src.mtime);
      files.set(r, fileState(lstatSync(b, { bigint: true })));
    }
  }
}

const fileState = (st: BigIntStats): FileState => ({ size: st.size, mtimeNs: st.mtimeNs, ino: st.ino });

function readManifest(dir: string): CopyState | undefined {
  try {
    const m = JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8')) as { atNs: string; files: [string, string, string, string][] };
    const files = new Map(m.files.map(([r, size, mtimeNs, ino]) => [r, { size: BigInt(size), mtimeNs: BigInt(mtimeNs), ino: BigInt(ino) }]));
    return { dir, files, atNs: BigInt(m.atNs) };
  } catch {
    return undefined;
  }
}

interface FileState {
  size: bigint;
  mtimeNs: bigint;
  ino: bigint;
}

/** How close to a copy a file's mtime may be and still be trusted as unchanged later (timestamps are coarse). */
const RACY_NS = 2_000_000_000n;

export interface SnapshotterOptions {
  /** How often a copy is made while the store is being written (ms). */
  intervalMs: number;
  /** The last copy, when known (else the first copy copies every file). */
  last?: CopyState;
  /** Runs fn while no query runs. */
  exclusive<T>(fn: () => T | Promise<T>): Promise<T>;
  onError?(err: Error): void;
}

/**
 * Makes durable copies of a live folder, every intervalMs while it is written and whenever
 * someone waits on durable() urgently. durable() resolves once a copy that began after the call
 * is on stable storage: everything the store had committed when it was called survives a
 * machine crash from then on.
 */
export class Snapshotter {
  private readonly root: string;
  private seq: number;
  /** The files of the last durable copy as they were in the live folder when copied. */
  private last: CopyState | undefined;
  private waiters: { resolve(): void; reject(err: Error): void }[] = [];
  private running: Promise<void> | undefined;
  private again = false;
  private dirty = false;
  private readonly timer: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly live: string,
    private readonly opts: SnapshotterOptions,
  ) {
    this.root = snapshotsOf(live);
    mkdirSync(this.root, { recursive: true });
    // Unfinished copies of a process that died are useless.
    for (const n of readdirSync(this.root)) if (!/^\d+$/.test(n)) rmSync(join(this.root, n), { recursive: true, force: true });
    const latest = latestSnapshot(live);
    this.seq = latest ? Number(basename(latest)) : 0;
    this.last = opts.last?.dir === latest ? opts.last : undefined;
    this.timer = setInterval(() => {
      if (this.dirty || this.waiters.length) this.kick();
    }, opts.intervalMs);
    this.timer.unref();
  }

  /** The store was written (or may have been): the next tick makes a copy. */
  touched(): void {
    this.dirty = true;
  }

  /** Resolves once everything committed before the call is in a durable copy; urgent: start one now. */
  durable(urgent = false): Promise<void> {
    if (this.stopped) return Promise.reject(new Error('the store is closed'));
    const p = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (urgent) this.kick();
    return p;
  }

  /** One more copy now (after the store closed: its last state), then no more. */
  async stop(final: boolean): Promise<void> {
    clearInterval(this.timer);
    if (final) {
      this.dirty = true;
      this.kick();
    }
    while (this.running) await this.running;
    this.stopped = true;
    for (const w of this.waiters.splice(0)) w.reject(new Error('the store is closed'));
  }

  private kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.run().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  }

  private async run(): Promise<void> {
    // Whoever waits now committed before the copy below begins.
    const waiters = this.waiters.splice(0);
    this.dirty = false;
    try {
      await this.take();
      for (const w of waiters) w.resolve();
    } catch (err) {
      this.dirty = true;
      this.opts.onError?.(err as Error);
      for (const w of waiters) w.reject(err as Error);
    }
  }

  /** One durable copy: see the class comment. None when not one file changed since the last. */
  private async take(): Promise<void> {
    const name = String(this.seq + 1).padStart(12, '0');
    const tmp = join(this.root, `${name}.tmp`);
    const dst = join(this.root, name);
    const written: string[] = [];
    const dirs: string[] = [];
    const prev = this.last;
    const taken = await this.opts.exclusive(() => {
      const atNs = BigInt(Date.now()) * 1_000_000n;
      const files = new Map<string, FileState>();
      const folders: string[] = [];
      const walk = (rel: string) => {
        folders.push(rel);
        for (const e of readdirSync(join(this.live, rel), { withFileTypes: true })) {
          const r = rel ? join(rel, e.name) : e.name;
          if (e.isDirectory()) walk(r);
          else if (e.isFile()) files.set(r, fileState(lstatSync(join(this.live, r), { bigint: true })));
        }
      };
      walk('');
      const same = (r: string, s: FileState) => {
        const p = prev?.files.get(r);
        return !!p && !!prev && p.size === s.size && p.mtimeNs === s.mtimeNs && p.ino === s.ino && p.mtimeNs < prev.atNs - RACY_NS;
      };
      // Every file as the last copy has it, none added or removed: that copy is this one. An idle
      // store still answers reads (the gateway's timers query it every few seconds), so without
      // this it would be copied, a thousand links and some thirty folders fsynced, every few seconds.
      if (prev && files.size === prev.files.size && [...files].every(([r, s]) => same(r, s))) return undefined;
      for (const rel of folders) {
        const to = join(tmp, rel);
        mkdirSync(to);
        dirs.push(to);
      }
      for (const [r, s] of files) {
        if (same(r, s)) {
          try {
            linkSync(join(prev!.dir, r), join(tmp, r));
            continue;
          } catch {
            // the last copy lost it: copy it again
          }
        }
        copyFileSync(join(this.live, r), join(tmp, r));
        written.push(join(tmp, r));
      }
      const manifest = join(tmp, MANIFEST);
      writeFileSync(manifest, JSON.stringify({ atNs: String(atNs), files: [...files].map(([r, f]) => [r, String(f.size), String(f.mtimeNs), String(f.ino)]) }));
      written.push(manifest);
      return { files, atNs };
    });
    if (!taken) return;
    this.seq++;
    const { files, atNs } = taken;
    // With queries running again: the copy reaches stable storage, then takes its place.
    // Two at a time: the disk gets a queue, and the billing journal's writes still find a free thread.
    await inPairs(written, syncPath);
    // Deepest first; an empty folder has no entries to lose.
    await inPairs(
      dirs.reverse().filter((d) => readdirSync(d).length > 0),
      syncPath,
    );
    renameSync(tmp, dst);
    await syncPath(this.root);
    await syncPath(dirname(this.root));
    this.last = { dir: dst, files, atNs };
    for (const n of readdirSync(this.root)) if (n !== name) rmSync(join(this.root, n), { recursive: true, force: true });
  }
}

async function inPairs(items: string[], fn: (item: string) => Promise<void>): Promise<void> {
  let i = 0;
  const lane = async () => {
    while (i < items.length) await fn(items[i++]!);
  };
  await Promise.all([lane(), lane()]);
}

async function syncPath(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
