/**
 * Just enough of the Kubernetes protobuf encoding for Helm: client-go sends core/v1 Secrets (Helm's
 * release records) as `application/vnd.kubernetes.protobuf` — the magic `k8s\0`, then a
 * runtime.Unknown whose `raw` is the generated.proto message. This decodes a Secret (metadata
 * name, generateName, namespace, resourceVersion, labels, annotations; data, stringData, type,
 * immutable) into its JSON form; answers go back as JSON, which clients also accept.
 */

type Obj = Record<string, any>;
type Field = { no: number; wire: number; value: bigint | Buffer };

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated varint');
      const b = buf[i++]!;
      v |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const tag = varint();
    const no = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (wire === 0) out.push({ no, wire, value: varint() });
    else if (wire === 2) {
      const len = Number(varint());
      if (i + len > buf.length) throw new Error('truncated field');
      out.push({ no, wire, value: buf.subarray(i, i + len) });
      i += len;
    } else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}

const str = (f: Field) => (f.value as Buffer).toString('utf8');

function mapEntry(f: Field): [string, Buffer] {
  let key = '';
  let value: Buffer = Buffer.alloc(0);
  for (const e of fields(f.value as Buffer)) {
    if (e.no === 1) key = str(e);
    if (e.no === 2) value = e.value as Buffer;
  }
  return [key, value];
}

function objectMeta(buf: Buffer): Obj {
  const meta: Obj = {};
  const names: Record<number, string> = { 1: 'name', 2: 'generateName', 3: 'namespace', 5: 'uid', 6: 'resourceVersion' };
  for (const f of fields(buf)) {
    if (names[f.no]) meta[names[f.no]!] = str(f);
    else if (f.no === 11 || f.no === 12) {
      const k = f.no === 11 ? 'labels' : 'annotations';
      const [key, value] = mapEntry(f);
      (meta[k] ??= {} as Obj)[key] = value.toString('utf8');
    } else if (f.no === 14) (meta.finalizers ??= [] as string[]).push(str(f));
  }
  return meta;
}

/** A protobuf request body as JSON, or why it cannot be read. */
export function decodeProtobuf(body: Buffer): Obj | { error: string } {
  if (!body.subarray(0, 4).equals(MAGIC)) return { error: 'not a Kubernetes protobuf envelope' };
  let apiVersion = '';
  let kind = '';
  let raw: Buffer | undefined;
  for (const f of fields(body.subarray(4))) {
    if (f.no === 1) {
      for (const t of fields(f.value as Buffer)) {
        if (t.no === 1) apiVersion = str(t);
        if (t.no === 2) kind = str(t);
      }
    } else if (f.no === 2) raw = f.value as Buffer;
  }
  if (apiVersion !== 'v1' || kind !== 'Secret' || !raw) return { error: `protobuf is read for v1 Secrets only, not ${apiVersion} ${kind}` };
  const secret: Obj = { apiVersion, kind, metadata: {} };
  for (const f of fields(raw)) {
    if (f.no === 1) secret.metadata = objectMeta(f.value as Buffer);
    else if (f.no === 2) {
      const [key, value] = mapEntry(f);
      (secret.data ??= {} as Obj)[key] = value.toString('base64');
    } else if (f.no === 3) secret.type = str(f);
    else if (f.no === 4) {
      const [key, value] = mapEntry(f);
      (secret.stringData ??= {} as Obj)[key] = value.toString('utf8');
    } else if (f.no === 5) secret.immutable = f.value !== 0n;
  }
  return secret;
}
