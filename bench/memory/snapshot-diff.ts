/**
 * What a target holds per idle stream, by kind of object: `npx tsx bench/memory/snapshot-diff.ts
 * BEFORE OPEN STREAMS [FLOOR_BEFORE FLOOR_OPEN]`, with heap snapshots written by
 * `BENCH_MEMORY_SNAPSHOTS=DIR npm run bench:memory` (before the streams and while STREAMS of them
 * are open). Objects in OPEN whose id is not in BEFORE are new; they are summed by type and
 * constructor (or function) name, per stream. With the floor's pair of snapshots, the floor's
 * figure is subtracted: what remains is the gateway's own. Snapshots run to hundreds of MB parsed:
 * run it with NODE_OPTIONS=--max-old-space-size=6000.
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** Bytes and count per stream of the objects new in `open`, by "type:name". */
function newPerStream(before: Snapshot, open: Snapshot, streams: number): Map<string, { bytes: number; count: number }> {
  const fields = open.snapshot.meta.node_fields;
  const width = fields.length;
  const [type, name, id, size] = ['type', 'name', 'id', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number, number];
  const types = open.snapshot.meta.node_types[0];
  const old = new Set<number>();
  for (let i = 0; i < before.nodes.length; i += width) old.add(before.nodes[i + id]!);
  const out = new Map<string, { bytes: number; count: number }>();
  const n = open.nodes;
  for (let i = 0; i < n.length; i += width) {
    if (old.has(n[i + id]!)) continue;
    const t = types[n[i + type]!]!;
    // A string's name is its text: the first 40 characters tell which it is.
    const key = `${t}:${open.strings[n[i + name]!]!.slice(0, 40)}`;
    const e = out.get(key) ?? { bytes: 0, count: 0 };
    e.bytes += n[i + size]! / streams;
    e.count += 1 / streams;
    out.set(key, e);
  }
  return out;
}

const load = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as Snapshot;

const [before, open, count, floorBefore, floorOpen] = process.argv.slice(2);
if (!before || !open || !count) throw new Error('usage: snapshot-diff.ts BEFORE OPEN STREAMS [FLOOR_BEFORE FLOOR_OPEN]');
const streams = Number(count);
const target = newPerStream(load(before), load(open), streams);
const floor = floorBefore && floorOpen ? newPerStream(load(floorBefore), load(floorOpen), streams) : new Map<string, { bytes: number; count: number }>();
const rows = [...new Set([...target.keys(), ...floor.keys()])].map((k) => {
  const t = target.get(k) ?? { bytes: 0, count: 0 };
  const f = floor.get(k) ?? { bytes: 0, count: 0 };
  return { k, bytes: t.bytes - f.bytes, count: t.count - f.count };
});
rows.sort((a, b) => b.bytes - a.bytes);
const total = rows.reduce((s, r) => s + r.bytes, 0);
process.stdout.write(`${floor.size ? 'beyond the floor, ' : ''}bytes per stream: ${total.toFixed(0)}\n`);
for (const r of rows.slice(0, 60)) process.stdout.write(`${r.bytes.toFixed(1).padStart(9)} ${r.count.toFixed(2).padStart(7)}  ${r.k}\n`);
