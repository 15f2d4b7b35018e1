/**
 * Strategic merge patch, as the API server applies it to built-in kinds: lists of objects that
 * the Kubernetes types mark `patchStrategy: merge` are merged element by element on their merge
 * key (a container's env, ports, probes survive a patch that names the container), `null`
 * deletes a field, and the directives `$patch: delete | replace | merge`, `$retainKeys`,
 * `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` are honoured. Other lists
 * are replaced whole, as with a merge patch. Custom resources never get here: the API server
 * refuses strategic merge for them.
 */

type Obj = Record<string, any>;

/** Field name -> merge key, for the lists the built-in types merge (k8s.io/api patchMergeKey tags). */
const MERGE_KEYS: Record<string, string | ((item: Obj) => string)> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  imagePullSecrets: 'name',
  hostAliases: 'ip',
  topologySpreadConstraints: 'topologyKey',
  conditions: 'type',
  ownerReferences: 'uid',
  resourceClaims: 'name',
  // A container's ports merge on containerPort; a Service's on port.
  ports: (item) => ('containerPort' in item ? 'containerPort' : 'port'),
};

/** Lists of scalars that merge as sets. */
const SET_LISTS = new Set(['finalizers']);

const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const clone = <T>(v: T): T => structuredClone(v);

export function strategicMergePatch(target: unknown, patch: unknown): any {
  if (!isObj(patch)) return clone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _, ...rest } = patch;
    return clone(stripDirectives(rest));
  }
  if (patch.$patch === 'delete') return undefined;
  const out: Obj = isObj(target) ? target : {};
  const retain = Array.isArray(patch.$retainKeys) ? new Set(patch.$retainKeys as string[]) : undefined;
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      const field = k.slice('$deleteFromPrimitiveList/'.length);
      if (Array.isArray(out[field])) out[field] = (out[field] as unknown[]).filter((x) => !(v as unknown[]).includes(x));
      continue;
    }
    if (k.startsWith('$')) continue;
    if (v === null) {
      delete out[k];
      continue;
    }
    if (Array.isArray(v)) {
      out[k] = mergeList(k, out[k], v);
      continue;
    }
    const merged = strategicMergePatch(out[k], v);
    if (merged === undefined) delete out[k];
    else out[k] = merged;
  }
  for (const [k, order] of Object.entries(patch)) {
    if (!k.startsWith('$setElementOrder/') || !Array.isArray(out[k.slice('$setElementOrder/'.length)])) continue;
    const field = k.slice('$setElementOrder/'.length);
    out[field] = reorder(field, out[field] as unknown[], order as unknown[]);
  }
  if (retain) for (const k of Object.keys(out)) if (!retain.has(k)) delete out[k];
  return out;
}

function keyOf(field: string, item: unknown): string | undefined {
  const key = MERGE_KEYS[field];
  if (!key || !isObj(item)) return undefined;
  return typeof key === 'string' ? key : key(item);
}

function mergeList(field: string, current: unknown, patch: unknown[]): unknown[] {
  const base = Array.isArray(current) ? current : [];
  if (SET_LISTS.has(field)) return [...base, ...patch.filter((x) => !base.includes(x))];
  if (!MERGE_KEYS[field] || !patch.every(isObj)) return clone(stripDirectives(patch) as unknown[]);
  // `[{$patch: replace}, ...items]`: the list becomes the items.
  if (patch.some((p) => (p as Obj).$patch === 'replace')) return clone(stripDirectives(patch.filter((p) => (p as Obj).$patch !== 'replace')) as unknown[]);
  const out = clone(base) as Obj[];
  for (const item of patch as Obj[]) {
    const key = keyOf(field, item);
    const at =
      key === undefined
        ? -1
        : out.findIndex((x) => isObj(x) && x[key] === item[key] && (field !== 'ports' || (x.protocol ?? 'TCP') === (item.protocol ?? 'TCP')));
    if (item.$patch === 'delete') {
      if (at >= 0) out.splice(at, 1);
      continue;
    }
    if (at >= 0) out[at] = strategicMergePatch(out[at], item);
    else out.push(strategicMergePatch({}, item));
  }
  return out;
}

/** `$setElementOrder`: the listed elements in the given order, the others after them. */
function reorder(field: string, list: unknown[], order: unknown[]): unknown[] {
  const id = (x: unknown) => {
    const key = keyOf(field, x);
    return key === undefined ? JSON.stringify(x) : JSON.stringify((x as Obj)[key]);
  };
  const rank = new Map(order.map((o, i) => [id(o), i]));
  return [...list].sort((a, b) => (rank.get(id(a)) ?? order.length) - (rank.get(id(b)) ?? order.length));
}

/** Directive keys removed, for values stored as they are. */
export function stripDirectives(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripDirectives);
  if (!isObj(v)) return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([k]) => !k.startsWith('$'))
      .map(([k, x]) => [k, stripDirectives(x)]),
  );
}
