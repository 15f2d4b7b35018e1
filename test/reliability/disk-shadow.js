// A shadow of what the disk holds for sure: loaded into a gateway process with
// `node --import`, it records every operation under SHADOW_ROOT that puts data on stable storage,
// and nothing else. crash-image.ts rebuilds, from a prefix of that record, the folder as a
// machine crash at that moment could leave it at worst (the POSIX minimum):
//
// - a file's bytes are known from the fsync/fdatasync of that file (its whole content then),
//   or from a write on a descriptor opened O_DSYNC/O_SYNC (those bytes, once the write returns);
// - a directory's entries (names -> files) are known from the fsync of that directory;
// - everything else — a file never synced, the entries of a directory never synced, writes after
//   the last sync — is lost: such a file is empty, such a directory has no entries.
//
// Files are told apart by inode and birth time (an inode number is reused after a deletion).
// Contents are stored as 64 KiB blocks named by their hash, so copies of large, mostly unchanged
// files cost little. Each event is appended to SHADOW_LOG (one JSON line) before the synced
// call returns to its caller: whatever the process did after a durable write, the record has it.
//
// SHADOW_BOOT_ID: the kernel's boot id as this process reads it (a restart after a simulated
// machine crash is another boot).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join, resolve } from 'node:path';

const ROOT = process.env.SHADOW_ROOT ? fs.realpathSync(process.env.SHADOW_ROOT) : undefined;
const LOG = process.env.SHADOW_LOG;
const BOOT = process.env.SHADOW_BOOT_ID;
const BLOCK = 64 * 1024;

const orig = {
  openSync: fs.openSync,
  open: fs.open,
  closeSync: fs.closeSync,
  fsyncSync: fs.fsyncSync,
  fdatasyncSync: fs.fdatasyncSync,
  fsync: fs.fsync,
  fdatasync: fs.fdatasync,
  write: fs.write,
  writeSync: fs.writeSync,
  readFileSync: fs.readFileSync,
  appendFileSync: fs.appendFileSync,
  writeFileSync: fs.writeFileSync,
  existsSync: fs.existsSync,
  mkdirSync: fs.mkdirSync,
};

const blocksDir = LOG ? `${LOG}.blocks` : undefined;
if (blocksDir) orig.mkdirSync(blocksDir, { recursive: true });
const knownBlocks = new Set();

/** Descriptors opened with O_DSYNC or O_SYNC under ROOT. */
const dsync = new Set();

function under(path) {
  return ROOT !== undefined && (path === ROOT || path.startsWith(`${ROOT}/`));
}

function fdPath(fd) {
  try {
    return fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return undefined;
  }
}

const idOf = (st) => `${st.ino}:${st.birthtimeNs}`;

function emit(event) {
  orig.appendFileSync(LOG, `${JSON.stringify(event)}\n`);
}

function storeBlocks(buf) {
  const names = [];
  for (let off = 0; off < buf.length; off += BLOCK) {
    const part = buf.subarray(off, Math.min(buf.length, off + BLOCK));
    const h = createHash('sha1').update(part).digest('hex');
    if (!knownBlocks.has(h)) {
      const p = join(blocksDir, h);
      if (!orig.existsSync(p)) orig.writeFileSync(p, part);
      knownBlocks.add(h);
    }
    names.push(h);
  }
  return names;
}

/** After fsync/fdatasync of fd: the file's whole content, or the directory's entries, are durable. */
function synced(fd) {
  const path = fdPath(fd);
  if (!path || !under(path)) return;
  const st = fs.fstatSync(fd, { bigint: true });
  if (st.isDirectory()) {
    const entries = [];
    for (const name of fs.readdirSync(path)) {
      try {
        const e = fs.lstatSync(join(path, name), { bigint: true });
        if (e.isDirectory() || e.isFile()) entries.push([name, idOf(e), e.isDirectory()]);
      } catch {
        // gone meanwhile
      }
    }
    emit({ t: 'dir', id: idOf(st), path, entries });
  } else if (st.isFile()) {
    const content = orig.readFileSync(`/proc/self/fd/${fd}`);
    emit({ t: 'file', id: idOf(st), path, size: content.length, blocks: storeBlocks(content) });
  }
}

/** After a write on an O_DSYNC descriptor returned: those bytes are durable where they landed. */
function wroteDurably(fd, bytes, position) {
  const st = fs.fstatSync(fd, { bigint: true });
  // Appends (position null on an O_APPEND descriptor) end at the file's size.
  const at = position === null || position === undefined ? Number(st.size) - bytes.length : position;
  emit({ t: 'write', id: idOf(st), path: fdPath(fd), at, size: bytes.length, blocks: storeBlocks(Buffer.from(bytes)) });
}

const SYNC_FLAGS = fs.constants.O_DSYNC | fs.constants.O_SYNC;

function noteOpen(path, flags, fd) {
  if (typeof flags === 'number' && flags & SYNC_FLAGS && typeof path === 'string' && under(resolve(path))) dsync.add(fd);
  else dsync.delete(fd);
}

if (ROOT && LOG) {
  fs.openSync = function (path, flags, mode) {
    const fd = orig.openSync(path, flags, mode);
    noteOpen(String(path), flags, fd);
    return fd;
  };
  fs.open = function (path, flags, mode, cb) {
    const callback = [mode, cb, flags].find((f) => typeof f === 'function');
    const args = [path, flags, mode].filter((a) => typeof a !== 'function' && a !== undefined);
    return orig.open(...args, (err, fd) => {
      if (!err) noteOpen(String(path), flags, fd);
      callback(err, fd);
    });
  };
  fs.closeSync = function (fd) {
    dsync.delete(fd);
    return orig.closeSync(fd);
  };
  fs.fsyncSync = function (fd) {
    orig.fsyncSync(fd);
    synced(fd);
  };
  fs.fdatasyncSync = function (fd) {
    orig.fdatasyncSync(fd);
    synced(fd);
  };
  fs.fsync = function (fd, cb) {
    orig.fsync(fd, (err) => {
      if (!err) synced(fd);
      cb(err);
    });
  };
  fs.fdatasync = function (fd, cb) {
    orig.fdatasync(fd, (err) => {
      if (!err) synced(fd);
      cb(err);
    });
  };
  fs.writeSync = function (fd, buffer, ...rest) {
    const n = orig.writeSync(fd, buffer, ...rest);
    if (dsync.has(fd) && typeof buffer !== 'string') {
      const [offset = 0, , position = null] = rest;
      wroteDurably(fd, buffer.subarray(offset, offset + n), position);
    }
    return n;
  };
  fs.write = function (fd, buffer, ...rest) {
    const cb = rest.pop();
    return orig.write(fd, buffer, ...rest, (err, n, buf) => {
      if (!err && dsync.has(fd) && typeof buffer !== 'string') {
        const [offset = 0, , position = null] = rest;
        wroteDurably(fd, buffer.subarray(offset, offset + n), position);
      }
      cb(err, n, buf);
    });
  };
  // fs/promises: FileHandle.sync()/datasync() (the store's durable copies use them).
  const probe = await fs.promises.open(process.execPath, 'r');
  const proto = Object.getPrototypeOf(probe);
  await probe.close();
  for (const m of ['sync', 'datasync']) {
    const o = proto[m];
    proto[m] = async function () {
      await o.call(this);
      synced(this.fd);
    };
  }
}

if (BOOT) {
  fs.readFileSync = function (path, ...rest) {
    if (path === '/proc/sys/kernel/random/boot_id') {
      const enc = typeof rest[0] === 'string' ? rest[0] : rest[0]?.encoding;
      return enc ? `${BOOT}\n` : Buffer.from(`${BOOT}\n`);
    }
    return orig.readFileSync(path, ...rest);
  };
}

syncBuiltinESMExports();
