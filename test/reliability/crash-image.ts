import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  appendFileSync,
  writeFileSync,
  type BigIntStats,
} from 'node:fs';
import { join } from 'node:path';

/**
 * The other half of disk-shadow.js: rebuilds a folder as a machine crash would leave it, from the
 * durable operations a process recorded (see there for the model). Also seeds a record with a
 * folder made durable from here (the test's own set-up, before the process under test starts).
 */

type Event =
  | { t: 'file'; id: string; size: number; blocks: string[] }
  | { t: 'write'; id: string; at: number; size: number; blocks: string[] }
  | { t: 'dir'; id: string; path: string; entries: [string, string, boolean][] };

const BLOCK = 64 * 1024;
const idOf = (st: BigIntStats) => `${st.ino}:${st.birthtimeNs}`;

/** The id disk-shadow.js gives a file or folder. */
export function shadowId(path: string): string {
  return idOf(lstatSync(path, { bigint: true }));
}

/** The complete events of a record (a line torn by the kill is not one), each with the record's size once it was written. */
export function readEvents(log: string): { event: Event; end: number }[] {
  if (!existsSync(log)) return [];
  const out: { event: Event; end: number }[] = [];
  let end = 0;
  for (const line of readFileSync(log, 'utf8').split('\n')) {
    end += Buffer.byteLength(line) + 1;
    if (!line) continue;
    try {
      out.push({ event: JSON.parse(line) as Event, end });
    } catch {
      // torn
    }
  }
  return out;
}

function blocks(log: string, names: string[]): Buffer {
  return Buffer.concat(names.map((h) => readFileSync(join(`${log}.blocks`, h))));
}

/** Writes into `out` what the disk holds after the first `n` events of `log`, `root` being the data folder's id. */
export function crashImage(log: string, n: number, root: string, out: string): void {
  const files = new Map<string, Buffer>();
  const dirs = new Map<string, [string, string, boolean][]>();
  for (const { event: e } of readEvents(log).slice(0, n)) {
    if (e.t === 'dir') dirs.set(e.id, e.entries);
    else if (e.t === 'file') files.set(e.id, blocks(log, e.blocks));
    else {
      const bytes = blocks(log, e.blocks);
      let cur = files.get(e.id) ?? Buffer.alloc(0);
      if (cur.length < e.at + bytes.length) cur = Buffer.concat([cur, Buffer.alloc(e.at + bytes.length - cur.length)]);
      bytes.copy(cur, e.at);
      files.set(e.id, cur);
    }
  }
  const materialize = (id: string, to: string, depth: number) => {
    mkdirSync(to, { recursive: true });
    if (depth > 32) return;
    for (const [name, child, isDir] of dirs.get(id) ?? []) {
      // A file never synced is empty; a folder never synced has no entries.
      if (isDir) materialize(child, join(to, name), depth + 1);
      else writeFileSync(join(to, name), files.get(child) ?? Buffer.alloc(0));
    }
  };
  materialize(root, out, 0);
}

/** fsyncs every file and folder under `dir` (so it is durable) and records that as events of `log`. */
export function seedDurable(dir: string, log: string): void {
  mkdirSync(`${log}.blocks`, { recursive: true });
  const store = (buf: Buffer) => {
    const names: string[] = [];
    for (let off = 0; off < buf.length; off += BLOCK) {
      const part = buf.subarray(off, Math.min(buf.length, off + BLOCK));
      const h = createHash('sha1').update(part).digest('hex');
      const p = join(`${log}.blocks`, h);
      if (!existsSync(p)) writeFileSync(p, part);
      names.push(h);
    }
    return names;
  };
  const sync = (path: string) => {
    const fd = openSync(path, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  };
  const walk = (path: string) => {
    const entries: [string, string, boolean][] = [];
    for (const name of readdirSync(path)) {
      const p = join(path, name);
      const st = lstatSync(p, { bigint: true });
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) {
        sync(p);
        const content = readFileSync(p);
        appendFileSync(log, `${JSON.stringify({ t: 'file', id: idOf(st), size: content.length, blocks: store(content) })}\n`);
      } else continue;
      entries.push([name, idOf(st), st.isDirectory()]);
    }
    sync(path);
    appendFileSync(log, `${JSON.stringify({ t: 'dir', id: shadowId(path), path, entries })}\n`);
  };
  walk(dir);
}
