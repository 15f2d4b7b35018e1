import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, mkdtempSync, open, openSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync, writeSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CommitRecord } from './commit.js';
import { openStore, type Store } from '../store/index.js';
import { BillingJournal, LOCK_STALE_MS, parseSegment } from './journal.js';
import { credit } from './ledger.js';
import { foldJournalTable, TableJournal } from './table-journal.js';

const record = (o: string, c = '10'): CommitRecord => ({
  o,
  l: 'lease-1',
  r: `req-${o}`,
  kn: 'key',
  kh: 'sha256:k',
  a: 'acct',
  g: 'g',
  m: 'm',
  um: 'u',
  p: 'messages',
  it: 3,
  ct: 0,
  wt: 0,
  ot: 4,
  rt: 0,
  c,
  us: 'reported',
  s: 'ok',
  hs: 200,
  ms: 5,
  tt: null,
});
const rec = (o: string, c?: string) => JSON.stringify(record(o, c));
const parsed = (lines: string[]) => lines.map((l) => JSON.parse(l) as CommitRecord);

const dirs: string[] = [];
const fresh = () => {
  const d = mkdtempSync(join(tmpdir(), 'tollgate-journal-'));
  dirs.push(d);
  return d;
};
const segments = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.jsonl'));

/** Occupies every thread of libuv's pool until the returned function is called. */
function blockThreadPool(dir: string): () => void {
  const fifos = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE ?? 4) }, (_, i) => join(dir, `fifo-${i}`));
  for (const f of fifos) {
    execFileSync('mkfifo', [f]);
    // An open for reading blocks its pool thread until a writer opens the FIFO.
    open(f, 'r', (err, fd) => {
      if (!err) closeSync(fd);
    });
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    // O_NONBLOCK: fails at once (ENXIO) instead of hanging if a reader has not opened yet.
    for (const f of fifos) {
      for (;;) {
        try {
          closeSync(openSync(f, constants.O_WRONLY | constants.O_NONBLOCK));
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENXIO') throw err;
        }
      }
    }
  };
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('billing journal', () => {
  it('has a record on disk when append resolves, and deletes a segment once the store has every line of it', async () => {
    const dir = fresh();
    const j = new BillingJournal(dir, 300); // small segments (a line is about 210 bytes): the third record goes to a new one
    const segs = await Promise.all([j.append(rec('a')), j.append(rec('b'))]);
    const [name] = segments(dir);
    expect(parsed(parseSegment(readFileSync(join(dir, name!), 'utf8'))).map((r) => r.o)).toEqual(['a', 'b']);
    const third = await j.append(rec('c'));
    expect(segments(dir)).toHaveLength(2);
    j.committed(segs[0]!, 1);
    expect(segments(dir)).toHaveLength(2); // one line of the first segment is not in the store yet
    j.committed(segs[1]!, 1);
    expect(segments(dir)).toEqual([third.name]); // sealed and fully stored: gone
    j.committed(third, 1);
    await j.close();
    expect(readdirSync(dir)).toEqual([]); // the lock goes too
  });

  it('keeps at close what the store has not taken, and the next process replays it once, skipping a line torn by the crash', async () => {
    const dir = fresh();
    const j = new BillingJournal(dir);
    const seg = await j.append(rec('a', '7'));
    await j.append(rec('b', '8'));
    j.committed(seg, 1); // only 'a' reached the store
    await j.close();
    const [name] = segments(dir);
    // A crash mid-write: the start of a third line landed in the zeros the segment grew by.
    const fd = openSync(join(dir, name!), 'r+');
    writeSync(fd, '{"o":"torn', readFileSync(join(dir, name!), 'utf8').indexOf('\0'));
    closeSync(fd);

    const next = new BillingJournal(dir);
    expect(next.leftover).toEqual([name]);
    const replayed: string[][] = [];
    expect(await next.replayLeftover(async (records) => void replayed.push(records), 1)).toBe(2);
    // Both complete lines go again: the store's operation ids make 'a' a no-op there.
    expect(replayed.map((b) => parsed(b).map((r) => [r.o, r.c]))).toEqual([[['a', '7']], [['b', '8']]]);
    expect(segments(dir)).toHaveLength(1); // only next's own, empty segment
    await next.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('grows a segment by zeros ahead of its records, so that a durable write seldom changes the file length', async () => {
    const dir = fresh();
    const j = new BillingJournal(dir);
    const size = () => statSync(join(dir, segments(dir)[0]!)).size;
    const growth = 256 << 10;
    let bytes = 0;
    const add = (o: string) => {
      bytes += rec(o).length + 1;
      return j.append(rec(o));
    };
    await add('a');
    expect(size()).toBe(bytes + growth);
    await add('b');
    expect(size()).toBe(bytes - rec('b').length - 1 + growth); // written into the zeros: the same length
    // Past the zeros: the write that needs more brings the next 256 KiB with it.
    await Promise.all(Array.from({ length: Math.ceil(growth / rec('a').length) }, (_, i) => add(`r${i}`)));
    expect(size()).toBe(bytes + growth);
    const lines = parseSegment(readFileSync(join(dir, segments(dir)[0]!), 'utf8'));
    expect(lines).toHaveLength(2 + Math.ceil(growth / rec('a').length));
    expect(
      parsed(lines)
        .slice(0, 3)
        .map((r) => r.o),
    ).toEqual(['a', 'b', 'r0']);
    await j.close();
  });

  it('writes a lone record on the event loop while the disk is quick, and leaves everything else to the thread pool', async () => {
    const quick = new BillingJournal(fresh());
    const slow = new BillingJournal(fresh(), undefined, undefined, 0); // every write counts as slow
    const read = (j: BillingJournal) => parsed(parseSegment(readFileSync(join(j.dir, segments(j.dir)[0]!), 'utf8'))).map((r) => r.o);
    // Every thread of libuv's pool blocked (each opening a FIFO no one writes to yet): a write that
    // goes there cannot land until they are released, one made on the event loop lands at once.
    const unblock = blockThreadPool(fresh());
    try {
      const alone = quick.append(rec('alone'), true);
      expect(read(quick)).toEqual(['alone']);
      const pooled = quick.append(rec('pooled'));
      const queued = quick.append(rec('queued'), true); // a write is under way: it waits its turn
      const slowAlone = slow.append(rec('slow'), true);
      expect(read(quick)).toEqual(['alone']);
      expect(read(slow)).toEqual([]);
      unblock();
      await Promise.all([alone, pooled, queued, slowAlone]);
    } finally {
      unblock();
    }
    expect(read(quick)).toEqual(['alone', 'pooled', 'queued']);
    expect(read(slow)).toEqual(['slow']);
    await Promise.all([quick.close(), slow.close()]);
  });

  it('leaves a segment in place when its replay fails, for the next start', async () => {
    const dir = fresh();
    const j = new BillingJournal(dir);
    await j.append(rec('a'));
    await j.close();
    const next = new BillingJournal(dir);
    await expect(next.replayLeftover(() => Promise.reject(new Error('store down')))).rejects.toThrow('store down');
    expect(segments(dir)).toContain(next.leftover[0]);
  });

  it('refuses a directory a live process on this host holds, and takes over from one that is gone', async () => {
    const dir = fresh();
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      writeFileSync(join(dir, 'LOCK'), JSON.stringify({ host: hostname(), pid: other.pid }));
      expect(() => new BillingJournal(dir)).toThrow(`in use by process ${other.pid}`);
    } finally {
      const gone = new Promise((r) => other.once('exit', r));
      other.kill('SIGKILL');
      await gone;
    }
    const j = new BillingJournal(dir);
    expect(JSON.parse(readFileSync(join(dir, 'LOCK'), 'utf8'))).toMatchObject({ host: hostname(), pid: process.pid });
    await j.close();
  });

  it('takes over a lock whose pid now belongs to another process (a container restart reuses pids)', async () => {
    const dir = fresh();
    // This test's own parent is alive, but it is not the process that wrote the lock: its start time differs.
    writeFileSync(join(dir, 'LOCK'), JSON.stringify({ host: hostname(), pid: process.ppid, start: '1' }));
    const j = new BillingJournal(dir);
    await j.close();
  });

  it('after a failed write, rejects that append and writes the next ones to a fresh segment, so no good line follows a torn one', async () => {
    const dir = fresh();
    const j = new BillingJournal(dir);
    await j.append(rec('a'));
    // The disk goes away under the open segment (here: its descriptor is closed).
    closeSync((j as unknown as { current: { fd: number } }).current.fd);
    await expect(j.append(rec('b'))).rejects.toThrow();
    const seg = await j.append(rec('c'));
    const lines = segments(dir).map((f) => parsed(parseSegment(readFileSync(join(dir, f), 'utf8'))).map((r) => r.o));
    expect(lines).toEqual([['a'], ['c']]);
    expect(seg.name).toBe(segments(dir)[1]);
  });

  for (const alone of [true, false])
    it(`keeps writing after a failed write on a segment the store has all of, whose close fails too (${alone ? 'on the event loop' : 'through the pool'})`, async () => {
      const dir = fresh();
      const j = new BillingJournal(dir);
      const errors: string[] = [];
      j.onError = (op, _segment, err) => errors.push(`${op}: ${(err as NodeJS.ErrnoException).code}`);
      j.committed(await j.append(rec('a')), 1);
      // The disk goes away under the open segment: its writes fail, and so does its close (a
      // descriptor that is not open; closing the real one could let another open reuse its number).
      const cur = (j as unknown as { current: { fd: number } }).current;
      const real = cur.fd;
      cur.fd = 1 << 30;
      await expect(j.append(rec('b'), alone)).rejects.toThrow();
      closeSync(real);
      // The failed segment held only a stored line, so it is gone; the next append opens another.
      const seg = await j.append(rec('c'), alone);
      expect(errors).toEqual(['close: EBADF']);
      expect(segments(dir)).toEqual([seg.name]);
      expect(parsed(parseSegment(readFileSync(join(dir, seg.name), 'utf8'))).map((r) => r.o)).toEqual(['c']);
      await j.close();
    });

  it('refuses a lock another host touched lately (a shared volume), and takes over one left untouched', async () => {
    const dir = fresh();
    const lock = join(dir, 'LOCK');
    writeFileSync(lock, JSON.stringify({ host: 'other-pod', pid: 1 }));
    expect(() => new BillingJournal(dir)).toThrow('in use by host other-pod');
    const old = new Date(Date.now() - LOCK_STALE_MS - 1000);
    utimesSync(lock, old, old);
    const j = new BillingJournal(dir);
    j.touch();
    expect(Date.now() - statSync(lock).mtimeMs).toBeLessThan(LOCK_STALE_MS);
    await j.close();
  });

  it('on a store whose commits are durable only in its copies (PGlite on a folder), keeps a stored segment until a copy has it', async () => {
    const dir = fresh();
    // No periodic copy during the test: only the ones asked for.
    const store = await openStore({ dataDir: join(dir, 'pg'), snapshotIntervalMs: 600_000 });
    try {
      const j = new BillingJournal(join(dir, 'journal'), 300, store.durable);
      const segs = await Promise.all([j.append(rec('a')), j.append(rec('b'))]);
      const third = await j.append(rec('c'));
      j.committed(segs[0]!, 2);
      await new Promise((r) => setTimeout(r, 50));
      // In the store, not yet on stable storage: a machine crash would take the store back without it.
      expect(segments(join(dir, 'journal'))).toHaveLength(2);
      await store.durable!(true);
      await new Promise((r) => setImmediate(r));
      expect(segments(join(dir, 'journal'))).toEqual([third.name]);
      j.committed(third, 1);
      // Closing asks for a copy, so a clean shutdown leaves nothing to replay.
      await j.close();
      expect(readdirSync(join(dir, 'journal'))).toEqual([]);
    } finally {
      await store.close();
    }
  }, 120_000);

  it('refuses appends after close', async () => {
    const j = new BillingJournal(fresh());
    await j.close();
    await expect(j.append(rec('a'))).rejects.toThrow('closed');
  });
});

it('the journal table refuses PGlite, whose commits are durable only in its copies', async () => {
  const store = await openStore({});
  try {
    expect(() => new TableJournal(store)).toThrow(/needs PostgreSQL/);
  } finally {
    await store.close();
  }
});

describe.skipIf(!process.env.DATABASE_URL)('the billing journal table on PostgreSQL', () => {
  let store: Store;
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const rows = async () => (await store.query<{ id: unknown; lines: string }>('SELECT id, lines FROM billing_journal ORDER BY id')).rows;
  const usage = async () => Number((await store.query<{ n: unknown }>('SELECT COUNT(*) AS n FROM usage_records')).rows[0]!.n);
  beforeAll(async () => {
    store = await openStore({ databaseUrl: process.env.DATABASE_URL, schema });
    await credit(store, { account: 'acct', operationId: 'grant', amount: 1_000_000n });
  });
  afterAll(async () => {
    await store?.query(`DROP SCHEMA "${schema}" CASCADE`);
    await store?.close();
  });

  it('writes the records that settle together in one row, and deletes it once the store has every line', async () => {
    const j = new TableJournal(store);
    const lines = Array.from({ length: 10 }, (_, i) => rec(`together-${i}`));
    const segs = await Promise.all(lines.map((l) => j.append(l)));
    expect(new Set(segs).size).toBe(1);
    expect((await rows()).map((r) => r.lines.split('\n'))).toEqual([lines]);

    j.committed(segs[0]!, 4);
    await j.close();
    expect(await rows()).toHaveLength(1);
    const k = new TableJournal(store);
    k.committed(segs[0]!, 6);
    await k.close();
    expect(await rows()).toEqual([]);
  });

  it('writes a row again under a new id when its id is taken, and deletes only its own', async () => {
    const j = new TableJournal(store);
    const first = await j.append(rec('taken-1'), true);
    const id = BigInt(String((await rows()).find((r) => r.lines === rec('taken-1'))!.id));
    // The ids this journal would write next, taken meanwhile: another replica drew the same base.
    const theirs = [1n, 2n, 3n, 4n, 5n].map((n) => String(id + n));
    await store.query("INSERT INTO billing_journal (id, lines) OVERRIDING SYSTEM VALUE SELECT i, 'theirs' FROM unnest($1::bigint[]) AS i", [theirs]);
    const second = await j.append(rec('taken-2'), true);
    expect(theirs.map((i) => `billing_journal:${i}`)).not.toContain(second.name);
    expect((await rows()).filter((r) => r.lines !== 'theirs').map((r) => r.lines)).toEqual(expect.arrayContaining([rec('taken-1'), rec('taken-2')]));

    j.committed(first, 1);
    j.committed(second, 1);
    await j.close();
    expect((await rows()).map((r) => String(r.id))).toEqual(theirs);
    await store.query('DELETE FROM billing_journal');
  });

  it('folds rows older than asked into the books once, and leaves younger ones', async () => {
    const j = new TableJournal(store);
    await j.append(rec('left-1'), true);
    await j.append(rec('left-2'), true);
    await j.close();
    expect(await rows()).toHaveLength(2);
    const before = await usage();

    expect(await foldJournalTable(store, 60_000)).toBe(0);
    expect(await rows()).toHaveLength(2);
    expect(await foldJournalTable(store, 0)).toBe(2);
    expect(await rows()).toEqual([]);
    expect(await usage()).toBe(before + 2);

    // A row whose lines are in the books already (its replica died between the commit and the delete) charges nothing again.
    await store.query('INSERT INTO billing_journal (lines) VALUES ($1)', [rec('left-1')]);
    const balance = async () =>
      BigInt(String((await store.query<{ balance: unknown }>("SELECT balance FROM accounts WHERE account = 'acct'")).rows[0]!.balance));
    const was = await balance();
    expect(await foldJournalTable(store, 0)).toBe(1);
    expect(await balance()).toBe(was);
    expect(await usage()).toBe(before + 2);
    expect(await rows()).toEqual([]);
  });
});
