import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { crdRuleErrors, validateRules, type FieldError } from './cel.js';
import { decodeProtobuf } from './protobuf.js';
import { strategicMergePatch } from './strategic-merge.js';

/**
 * An in-memory Kubernetes API server for tests and local trials: plain HTTP, no auth. It speaks
 * what the operator (@kubernetes/client-node) and a real kubectl need: legacy discovery, CRDs that
 * become served resources (status subresource, printer columns, Table output), namespaces,
 * secrets, configmaps, events, leases (and, stored only, services, deployments, HPAs, PDBs,
 * network policies, ingresses and RBAC),
 * list/watch with one global resourceVersion, bookmarks, 410
 * for a too-old resourceVersion, merge / JSON patches, strategic-merge patches for built-in kinds
 * (lists merged on their keys; 415 for custom resources, as the API server answers), server-side
 * apply (as a strategic merge, no field ownership), `dryRun` on every write, label and field
 * selectors, owner-reference garbage collection, and OpenAPI v3 (`/openapi/v3`) of the served
 * CRDs' schemas, as kubectl explain reads it.
 * Protobuf request bodies are read for Secrets only (Helm's release records; protobuf.ts).
 * Custom resources are checked against their CRD's x-kubernetes-validations (CEL, cel.ts) on
 * every write, with 422 Invalid as the API server answers; a CRD whose rules do not compile is
 * refused. Selective watches see an object that stops matching as DELETED and one that starts
 * as ADDED; a field selector on a field the kind does not index is a 400.
 * Not modelled: OpenAPI schema validation and pruning, admission, finalizers, pagination, other protobuf
 * bodies (kubectl create namespace sends one and gets 415: use kubectl apply -f).
 */

type Obj = Record<string, any>;

interface ResourceType {
  group: string; // '' for core
  version: string;
  plural: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  statusSubresource: boolean;
  /** Custom resources (and CRDs) carry metadata.generation. */
  generation: boolean;
  columns: Column[];
  crd?: string;
  /** The CRD version's openAPIV3Schema: its `default`s are applied on every write. */
  schema?: Obj;
  /** Field selectors beyond metadata.name / metadata.namespace (a CRD's selectableFields, a Secret's type). */
  fields?: string[];
}

interface Column {
  name: string;
  type: string;
  format?: string;
  jsonPath?: string;
  description?: string;
  priority?: number;
  /** Built-in cells computed in code. */
  cell?: (o: Obj) => unknown;
}

interface WatchEvent {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  rt: ResourceType;
  object: Obj;
  /** A MODIFIED event's object before the change: a selective watch turns it into ADDED or DELETED. */
  prev?: Obj;
}

interface Watcher {
  rt: ResourceType;
  namespace?: string;
  match: (o: Obj) => boolean;
  send: (type: string, object: Obj) => void;
}

export interface KubeApiOptions {
  port?: number;
  host?: string;
  /** Watch events kept for resuming watches; older resourceVersions answer 410 Gone. */
  historySize?: number;
  /** Interval of BOOKMARK events on watches that asked for them. */
  bookmarkMs?: number;
  /** Log every request to stderr. */
  verbose?: boolean;
}

export interface KubeApi {
  url: string;
  port: number;
  close(): Promise<void>;
  /** Drops the watch history: any watch resuming from an older resourceVersion gets 410. */
  compact(): void;
  /** Ends every open watch (as an apiserver restart would). */
  dropWatches(): void;
  /** Direct access for assertions: the stored object or undefined. */
  get(apiVersion: string, plural: string, namespace: string | undefined, name: string): Obj | undefined;
  list(apiVersion: string, plural: string, namespace?: string): Obj[];
  /** Requests seen (method and path), for tests that count writes. */
  requests: { method: string; path: string; contentType?: string }[];
  resourceVersion(): number;
  /** Writes a kubeconfig for kubectl / client-node pointing at this server; returns its path. */
  kubeconfig(path: string, namespace?: string): Promise<string>;
}

const builtin = (r: Partial<ResourceType> & Pick<ResourceType, 'plural' | 'kind'>): ResourceType => ({
  group: '',
  version: 'v1',
  singular: r.kind.toLowerCase(),
  namespaced: true,
  shortNames: [],
  categories: [],
  statusSubresource: false,
  generation: false,
  columns: [],
  ...r,
});

/** The field selectors core/v1 Events take besides metadata.name and metadata.namespace (kubectl describe uses them). */
const EVENT_FIELDS = [
  'involvedObject.kind',
  'involvedObject.namespace',
  'involvedObject.name',
  'involvedObject.uid',
  'involvedObject.apiVersion',
  'involvedObject.resourceVersion',
  'involvedObject.fieldPath',
  'reason',
  'reportingComponent',
  'source',
  'type',
];

const AGE: Column = { name: 'Age', type: 'string', description: 'CreationTimestamp', cell: (o) => age(o.metadata?.creationTimestamp) };

const BUILTINS: ResourceType[] = [
  builtin({
    plural: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
    fields: ['status.phase'],
    shortNames: ['ns'],
    statusSubresource: true,
    columns: [{ name: 'Status', type: 'string', cell: (o) => o.status?.phase ?? 'Active' }, AGE],
  }),
  builtin({
    plural: 'secrets',
    kind: 'Secret',
    fields: ['type'],
    columns: [
      { name: 'Type', type: 'string', cell: (o) => o.type ?? 'Opaque' },
      { name: 'Data', type: 'string', cell: (o) => Object.keys(o.data ?? {}).length },
      AGE,
    ],
  }),
  builtin({
    plural: 'configmaps',
    kind: 'ConfigMap',
    shortNames: ['cm'],
    columns: [{ name: 'Data', type: 'string', cell: (o) => Object.keys(o.data ?? {}).length }, AGE],
  }),
  builtin({
    plural: 'events',
    kind: 'Event',
    shortNames: ['ev'],
    fields: EVENT_FIELDS,
    columns: [
      { name: 'Type', type: 'string', cell: (o) => o.type },
      { name: 'Reason', type: 'string', cell: (o) => o.reason },
      { name: 'Object', type: 'string', cell: (o) => `${String(o.involvedObject?.kind ?? '').toLowerCase()}/${o.involvedObject?.name ?? ''}` },
      { name: 'Message', type: 'string', cell: (o) => o.message },
    ],
  }),
  builtin({ plural: 'serviceaccounts', kind: 'ServiceAccount', shortNames: ['sa'], columns: [AGE] }),
  builtin({ group: 'events.k8s.io', plural: 'events', kind: 'Event', shortNames: ['ev'], columns: [AGE] }),
  builtin({
    group: 'coordination.k8s.io',
    plural: 'leases',
    kind: 'Lease',
    columns: [{ name: 'Holder', type: 'string', cell: (o) => o.spec?.holderIdentity ?? '' }, AGE],
  }),
  // Stored only (nothing runs them), so that the manifests of a whole installation apply.
  builtin({
    plural: 'services',
    kind: 'Service',
    shortNames: ['svc'],
    statusSubresource: true,
    columns: [
      { name: 'Type', type: 'string', cell: (o) => o.spec?.type ?? 'ClusterIP' },
      { name: 'Ports', type: 'string', cell: (o) => ((o.spec?.ports ?? []) as Obj[]).map((p) => `${p.port}/${p.protocol ?? 'TCP'}`).join(',') },
      AGE,
    ],
  }),
  builtin({
    group: 'apps',
    plural: 'deployments',
    kind: 'Deployment',
    shortNames: ['deploy'],
    statusSubresource: true,
    generation: true,
    columns: [{ name: 'Ready', type: 'string', cell: (o) => `${o.status?.readyReplicas ?? 0}/${o.spec?.replicas ?? 1}` }, AGE],
  }),
  builtin({
    group: 'autoscaling',
    version: 'v2',
    plural: 'horizontalpodautoscalers',
    kind: 'HorizontalPodAutoscaler',
    shortNames: ['hpa'],
    statusSubresource: true,
    generation: true,
    columns: [{ name: 'Reference', type: 'string', cell: (o) => `${o.spec?.scaleTargetRef?.kind ?? ''}/${o.spec?.scaleTargetRef?.name ?? ''}` }, AGE],
  }),
  builtin({
    group: 'policy',
    plural: 'poddisruptionbudgets',
    kind: 'PodDisruptionBudget',
    shortNames: ['pdb'],
    statusSubresource: true,
    generation: true,
    columns: [AGE],
  }),
  builtin({ group: 'networking.k8s.io', plural: 'networkpolicies', kind: 'NetworkPolicy', shortNames: ['netpol'], generation: true, columns: [AGE] }),
  builtin({ group: 'networking.k8s.io', plural: 'ingresses', kind: 'Ingress', shortNames: ['ing'], statusSubresource: true, generation: true, columns: [AGE] }),
  builtin({ group: 'rbac.authorization.k8s.io', plural: 'roles', kind: 'Role', columns: [AGE] }),
  builtin({
    group: 'rbac.authorization.k8s.io',
    plural: 'rolebindings',
    kind: 'RoleBinding',
    columns: [{ name: 'Role', type: 'string', cell: (o) => `${o.roleRef?.kind ?? ''}/${o.roleRef?.name ?? ''}` }, AGE],
  }),
  builtin({ group: 'rbac.authorization.k8s.io', plural: 'clusterroles', kind: 'ClusterRole', namespaced: false, columns: [AGE] }),
  builtin({
    group: 'rbac.authorization.k8s.io',
    plural: 'clusterrolebindings',
    kind: 'ClusterRoleBinding',
    namespaced: false,
    columns: [{ name: 'Role', type: 'string', cell: (o) => `${o.roleRef?.kind ?? ''}/${o.roleRef?.name ?? ''}` }, AGE],
  }),
  builtin({
    group: 'apiextensions.k8s.io',
    plural: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    statusSubresource: true,
    generation: true,
    columns: [{ name: 'Created At', type: 'string', format: 'date-time', cell: (o) => o.metadata?.creationTimestamp }],
  }),
];

export async function startKubeApi(opts: KubeApiOptions = {}): Promise<KubeApi> {
  const historySize = opts.historySize ?? 1000;
  const bookmarkMs = opts.bookmarkMs ?? 1000;
  let rv = 0;
  /** "group/version/plural" -> resource type. */
  const types = new Map<string, ResourceType>();
  /** "group/version/plural" -> "ns/name" -> object. */
  const stores = new Map<string, Map<string, Obj>>();
  const history: WatchEvent[] = [];
  /** Lowest resourceVersion a watch may resume from. */
  let floor = 0;
  const watchers = new Set<Watcher>();
  const openWatches = new Set<ServerResponse>();
  const requests: KubeApi['requests'] = [];

  const tkey = (rt: Pick<ResourceType, 'group' | 'version' | 'plural'>) => `${rt.group}/${rt.version}/${rt.plural}`;
  const okey = (ns: string | undefined, name: string) => `${ns ?? ''}/${name}`;
  const apiVersionOf = (rt: ResourceType) => (rt.group ? `${rt.group}/${rt.version}` : rt.version);
  const storeOf = (rt: ResourceType) => {
    let s = stores.get(tkey(rt));
    if (!s) stores.set(tkey(rt), (s = new Map()));
    return s;
  };
  for (const rt of BUILTINS) types.set(tkey(rt), rt);

  function record(type: WatchEvent['type'], rt: ResourceType, object: Obj, prev?: Obj) {
    const ev: WatchEvent = { rv: Number(object.metadata.resourceVersion), type, rt, object: clone(object), ...(prev ? { prev: clone(prev) } : {}) };
    history.push(ev);
    while (history.length > historySize) floor = history.shift()!.rv;
    for (const w of watchers) {
      if (w.rt !== rt) continue;
      if (w.namespace && object.metadata.namespace !== w.namespace) continue;
      const seen = asSeenBy(ev, w.match);
      if (seen) w.send(seen.type, seen.object);
    }
  }

  function put(rt: ResourceType, object: Obj, type: 'ADDED' | 'MODIFIED') {
    const prev = storeOf(rt).get(okey(object.metadata.namespace, object.metadata.name));
    object.metadata.resourceVersion = String(++rv);
    if (rt.plural === 'customresourcedefinitions') registerCrd(object);
    storeOf(rt).set(okey(object.metadata.namespace, object.metadata.name), object);
    record(type, rt, object, type === 'MODIFIED' ? prev : undefined);
    return object;
  }

  function remove(rt: ResourceType, object: Obj) {
    storeOf(rt).delete(okey(object.metadata.namespace, object.metadata.name));
    const gone = clone(object);
    gone.metadata.resourceVersion = String(++rv);
    record('DELETED', rt, gone);
    if (rt.plural === 'customresourcedefinitions') unregisterCrd(object);
    if (rt.plural === 'namespaces') {
      for (const [k, s] of stores) {
        const t = types.get(k);
        if (!t?.namespaced) continue;
        for (const o of [...s.values()]) if (o.metadata.namespace === object.metadata.name) remove(t, o);
      }
    }
    collectGarbage(object.metadata.uid);
    return gone;
  }

  /** Deletes every object whose ownerReferences name a uid that no longer exists. */
  function collectGarbage(uid: string) {
    for (const [k, s] of stores) {
      const t = types.get(k);
      if (!t) continue;
      for (const o of [...s.values()]) {
        const refs = (o.metadata.ownerReferences ?? []) as Obj[];
        if (refs.length === 0 || !refs.some((r) => r.uid === uid)) continue;
        const alive = refs.some((r) => r.uid !== uid && uidExists(r.uid));
        if (!alive && s.has(okey(o.metadata.namespace, o.metadata.name))) remove(t, o);
      }
    }
  }

  function uidExists(uid: string): boolean {
    for (const s of stores.values()) for (const o of s.values()) if (o.metadata.uid === uid) return true;
    return false;
  }

  function registerCrd(crd: Obj) {
    const spec = crd.spec ?? {};
    for (const v of spec.versions ?? []) {
      if (!v.served) continue;
      const rt: ResourceType = {
        group: spec.group,
        version: v.name,
        plural: spec.names.plural,
        singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
        kind: spec.names.kind,
        namespaced: spec.scope !== 'Cluster',
        shortNames: spec.names.shortNames ?? [],
        categories: spec.names.categories ?? [],
        statusSubresource: Boolean(v.subresources?.status),
        generation: true,
        columns: ((v.additionalPrinterColumns ?? []) as Obj[]).map((c) => ({
          name: c.name,
          type: c.type,
          ...(c.format ? { format: c.format } : {}),
          jsonPath: c.jsonPath,
          description: c.description ?? '',
          priority: c.priority ?? 0,
        })),
        crd: crd.metadata.name,
        ...(v.schema?.openAPIV3Schema ? { schema: v.schema.openAPIV3Schema as Obj } : {}),
        fields: ((v.selectableFields ?? []) as Obj[]).map((f) => String(f.jsonPath).replace(/^\./, '')),
      };
      if (rt.columns.length === 0) rt.columns = [AGE];
      const existing = types.get(tkey(rt));
      // Keep the same object so that open watches stay attached.
      if (existing) Object.assign(existing, rt);
      else types.set(tkey(rt), rt);
    }
    if (!crd.status?.conditions) {
      crd.status = {
        acceptedNames: spec.names,
        storedVersions: (spec.versions ?? []).filter((v: Obj) => v.storage).map((v: Obj) => v.name),
        conditions: [
          { type: 'NamesAccepted', status: 'True', reason: 'NoConflicts', message: 'no conflicts found', lastTransitionTime: now() },
          { type: 'Established', status: 'True', reason: 'InitialNamesAccepted', message: 'the initial names have been accepted', lastTransitionTime: now() },
        ],
      };
    }
  }

  function unregisterCrd(crd: Obj) {
    for (const [k, t] of types) {
      if (t.crd !== crd.metadata.name) continue;
      types.delete(k);
      const s = stores.get(k);
      if (s) for (const o of [...s.values()]) remove(t, o);
      stores.delete(k);
    }
  }

  // ---------- HTTP ----------

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendStatus(res, 500, 'InternalError', (err as Error).message);
      else res.end();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://x');
    const method = req.method ?? 'GET';
    requests.push({ method, path: url.pathname + url.search, contentType: req.headers['content-type'] });
    // A long local trial (npm run kube-api) must not grow without bound.
    if (requests.length > 20_000) requests.splice(0, 10_000);
    if (opts.verbose)
      process.stderr.write(`${method} ${url.pathname}${url.search} accept=${req.headers.accept ?? ''} ct=${req.headers['content-type'] ?? ''}\n`);
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const seg = path.split('/').filter(Boolean);

    if (path === '/version') return json(res, 200, { major: '1', minor: '32', gitVersion: 'v1.32.0-tollgate-kube-api', platform: 'linux/amd64' });
    if (path === '/healthz' || path === '/readyz' || path === '/livez') return text(res, 200, 'ok');
    if (path === '/api')
      return json(res, 200, {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: req.headers.host ?? '' }],
      });
    if (path === '/apis') return json(res, 200, groupList());
    // OpenAPI v3 (what kubectl explain reads): the schemas of the served CRDs, one document per group version.
    if (path === '/openapi/v3') return json(res, 200, openapiRoot());
    if (seg[0] === 'openapi' && seg[1] === 'v3' && seg[2] === 'apis' && seg.length === 5) {
      const doc = openapiDoc(seg[3]!, seg[4]!);
      return doc ? json(res, 200, doc) : sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
    }
    if (path === '/api/v1') return json(res, 200, resourceList('', 'v1'));
    if (seg[0] === 'apis' && seg.length === 2) {
      const g = groupList().groups.find((x) => x.name === seg[1]);
      return g
        ? json(res, 200, { kind: 'APIGroup', apiVersion: 'v1', ...g })
        : sendStatus(res, 404, 'NotFound', `the server could not find the requested resource`);
    }
    if (seg[0] === 'apis' && seg.length === 3) {
      const list = resourceList(seg[1]!, seg[2]!);
      return list.resources.length > 0 ? json(res, 200, list) : sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
    }

    // /api/v1/... or /apis/{g}/{v}/...
    let group: string, version: string, rest: string[];
    if (seg[0] === 'api' && seg[1] === 'v1') [group, version, rest] = ['', 'v1', seg.slice(2)];
    else if (seg[0] === 'apis' && seg.length >= 4) [group, version, rest] = [seg[1]!, seg[2]!, seg.slice(3)];
    else return sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
    let watchPath = false;
    if (rest[0] === 'watch') {
      watchPath = true;
      rest = rest.slice(1);
    }
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3 && !['status', 'finalize'].includes(rest[2]!)) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [plural, name, sub] = rest as [string, string | undefined, string | undefined];
    const rt = types.get(`${group}/${version}/${plural}`);
    if (!rt) return sendStatus(res, 404, 'NotFound', `the server could not find the requested resource (${plural})`);
    if (rt.namespaced && !namespace && name) return sendStatus(res, 404, 'NotFound', `the server could not find the requested resource`);
    const ns = rt.namespaced ? namespace : undefined;
    const q = url.searchParams;
    const store = storeOf(rt);
    const raw = ['POST', 'PUT', 'PATCH'].includes(method) ? await readRaw(req) : undefined;
    let body = raw?.toString('utf8');
    // A DELETE may carry DeleteOptions in its body (kubectl sends dryRun there).
    const deleteOptions = method === 'DELETE' ? (await readBody(req)) || '{}' : undefined;
    // Helm's release records come as protobuf Secrets: read those (protobuf.ts) as JSON.
    if (raw !== undefined && method !== 'PATCH' && /protobuf/.test(req.headers['content-type'] ?? '') && plural === 'secrets') {
      const decoded = decodeProtobuf(raw);
      if (!('error' in decoded)) body = JSON.stringify(decoded);
    }
    // Other protobuf bodies (kubectl create namespace, say) are not modelled: say so plainly
    // instead of failing to parse them (kubectl apply -f sends JSON).
    if (body !== undefined && body === raw?.toString('utf8') && /protobuf|cbor/.test(req.headers['content-type'] ?? '')) {
      return sendStatus(
        res,
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (this test server does not read protobuf: use kubectl apply -f)`,
      );
    }
    let dryRun = q.has('dryRun');
    if (deleteOptions) {
      try {
        dryRun ||= ((JSON.parse(deleteOptions) as { dryRun?: string[] }).dryRun ?? []).length > 0;
      } catch {
        return sendStatus(res, 400, 'BadRequest', 'the DeleteOptions body is not JSON');
      }
    }

    if (!name) {
      if (method === 'GET' || method === 'DELETE') {
        const bad = selectorError(rt, q);
        if (bad) return sendStatus(res, 400, 'BadRequest', bad);
      }
      if (method === 'GET' && (watchPath || q.get('watch') === 'true' || q.get('watch') === '1')) return watch(req, res, rt, ns, q);
      if (method === 'GET') {
        const items = selected(rt, ns, q);
        const list = { kind: `${rt.kind}List`, apiVersion: apiVersionOf(rt), metadata: { resourceVersion: String(rv) }, items };
        return wantsTable(req) ? json(res, 200, table(rt, items, q, String(rv))) : json(res, 200, list);
      }
      if (method === 'POST') {
        const obj = parseBody(body!, req);
        const bad = invalid(rt, obj);
        if (bad) return sendStatus(res, 400, 'BadRequest', bad);
        if (!obj?.metadata) return sendStatus(res, 400, 'BadRequest', 'metadata is required');
        if (!obj.metadata.name && obj.metadata.generateName) obj.metadata.name = obj.metadata.generateName + randomUUID().slice(0, 5);
        if (!obj.metadata.name) return sendStatus(res, 422, 'Invalid', `${rt.kind} "" is invalid: metadata.name: Required value`);
        if (rt.namespaced) obj.metadata.namespace = ns ?? obj.metadata.namespace ?? 'default';
        if (store.has(okey(obj.metadata.namespace, obj.metadata.name)))
          return sendStatus(res, 409, 'AlreadyExists', `${rt.plural}${rt.group ? '.' + rt.group : ''} "${obj.metadata.name}" already exists`, {
            name: obj.metadata.name,
            group: rt.group,
            kind: rt.plural,
          });
        const created = create(rt, obj);
        if (refuse(res, rt, created)) return;
        if (dryRun) return json(res, 201, created);
        return json(res, 201, put(rt, created, 'ADDED'));
      }
      if (method === 'DELETE') {
        const items = selected(rt, ns, q);
        if (!dryRun) for (const o of items) remove(rt, o);
        return json(res, 200, { kind: `${rt.kind}List`, apiVersion: apiVersionOf(rt), metadata: { resourceVersion: String(rv) }, items });
      }
      return sendStatus(res, 405, 'MethodNotAllowed', `${method} is not supported on a collection`);
    }

    const current = store.get(okey(ns, name));
    const notFound = () =>
      sendStatus(res, 404, 'NotFound', `${rt.plural}${rt.group ? '.' + rt.group : ''} "${name}" not found`, { name, group: rt.group, kind: rt.plural });
    if (sub && sub !== 'status') return sendStatus(res, 404, 'NotFound', `subresource ${sub} is not served`);
    const statusOnly = sub === 'status';
    if (statusOnly && !rt.statusSubresource) return notFound();

    if (method === 'GET') {
      if (!current) return notFound();
      return wantsTable(req) ? json(res, 200, table(rt, [current], q, current.metadata.resourceVersion)) : json(res, 200, current);
    }
    if (method === 'DELETE') {
      if (!current) return notFound();
      if (dryRun) return json(res, 200, current);
      return json(res, 200, remove(rt, current));
    }
    if (method === 'PUT') {
      const obj = parseBody(body!, req);
      const bad = invalid(rt, obj);
      if (bad) return sendStatus(res, 400, 'BadRequest', bad);
      if (!current) {
        if (statusOnly) return notFound();
        // PUT creates when allowed (leases, most builtins): keep it simple and allow it.
        obj.metadata = { ...(obj.metadata ?? {}), name, ...(ns ? { namespace: ns } : {}) };
        const created = create(rt, obj);
        if (refuse(res, rt, created)) return;
        return json(res, 201, dryRun ? created : put(rt, created, 'ADDED'));
      }
      const sentRv = obj.metadata?.resourceVersion;
      if (sentRv && sentRv !== current.metadata.resourceVersion) {
        return sendStatus(
          res,
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${rt.plural}${rt.group ? '.' + rt.group : ''} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          { name, group: rt.group, kind: rt.plural },
        );
      }
      return update(res, rt, current, obj, statusOnly, dryRun);
    }
    if (method === 'PATCH') {
      const ct = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      let patched: Obj;
      if (ct === 'application/apply-patch+yaml') {
        const applied = parseYaml(body!) as Obj;
        if (!current) {
          if (statusOnly) return notFound();
          applied.metadata = { ...(applied.metadata ?? {}), name, ...(ns ? { namespace: ns } : {}) };
          const created = create(rt, applied);
          if (refuse(res, rt, created)) return;
          return json(res, 201, dryRun ? created : put(rt, created, 'ADDED'));
        }
        // Field ownership is not modelled: built-in lists merge on their keys, as the applied
        // fields of one manager would.
        patched = rt.crd ? mergePatch(clone(current), applied) : strategicMergePatch(clone(current), applied);
      } else {
        if (!current) return notFound();
        const patch = JSON.parse(body!) as unknown;
        if (ct === 'application/json-patch+json') {
          try {
            patched = jsonPatch(clone(current), patch as Obj[]);
          } catch (err) {
            return sendStatus(res, 422, 'Invalid', `the JSON patch could not be applied: ${(err as Error).message}`);
          }
        } else if (ct === 'application/merge-patch+json') {
          patched = mergePatch(clone(current), patch);
        } else if (ct === 'application/strategic-merge-patch+json' && !rt.crd) {
          patched = strategicMergePatch(clone(current), patch);
        } else {
          return sendStatus(
            res,
            415,
            'UnsupportedMediaType',
            `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
          );
        }
      }
      const badPatch = invalid(rt, patched);
      if (badPatch) return sendStatus(res, 400, 'BadRequest', badPatch);
      const sentRv = (patched.metadata ?? {}).resourceVersion;
      if (sentRv && sentRv !== current.metadata.resourceVersion) {
        return sendStatus(
          res,
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${rt.plural} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        );
      }
      return update(res, rt, current, patched, statusOnly, dryRun);
    }
    return sendStatus(res, 405, 'MethodNotAllowed', `${method} is not supported`);
  }

  /** What the real API server refuses to decode, for the fields clients get wrong. */
  function invalid(rt: ResourceType, obj: Obj): string | undefined {
    if (rt.plural === 'leases') {
      for (const f of ['acquireTime', 'renewTime']) {
        const v = obj.spec?.[f];
        // metav1.MicroTime is parsed with RFC3339Micro: exactly six fractional digits.
        if (v !== undefined && v !== null && !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$/.test(String(v))) {
          return `Lease in version "v1" cannot be handled as a Lease: parsing time "${String(v)}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse spec.${f}`;
        }
      }
    }
    return undefined;
  }

  function create(rt: ResourceType, obj: Obj): Obj {
    const o = clone(obj);
    o.apiVersion = apiVersionOf(rt);
    o.kind = rt.kind;
    o.metadata.uid = randomUUID();
    o.metadata.creationTimestamp = now();
    if (rt.generation) o.metadata.generation = 1;
    delete o.metadata.resourceVersion;
    if (rt.schema) applyDefaults(o, rt.schema);
    // With a status subresource, status cannot be set at creation (as in Kubernetes).
    if (rt.statusSubresource && rt.crd) delete o.status;
    if (rt.plural === 'namespaces') o.status = { phase: 'Active' };
    if (rt.plural === 'secrets') {
      o.type ??= 'Opaque';
      if (o.stringData) {
        o.data = { ...(o.data ?? {}) };
        for (const [k, v] of Object.entries(o.stringData as Record<string, string>)) o.data[k] = Buffer.from(v).toString('base64');
        delete o.stringData;
      }
    }
    return o;
  }

  /**
   * Validation after defaulting, before anything is stored (dry runs included): a custom
   * resource's x-kubernetes-validations (cel.ts) and a CRD's own rules compiling. Answers 422
   * Invalid with a cause per field, as the API server does; true when it refused.
   */
  function refuse(res: ServerResponse, rt: ResourceType, obj: Obj, old?: Obj): boolean {
    let errors: FieldError[] = [];
    if (rt.crd && rt.schema) errors = validateRules(rt.schema, obj, old);
    if (rt.plural === 'customresourcedefinitions') {
      ((obj.spec?.versions ?? []) as Obj[]).forEach((v, i) => {
        const schema = v.schema?.openAPIV3Schema as Obj | undefined;
        if (!schema) return;
        for (const e of crdRuleErrors(schema, `spec.versions[${i}].schema.openAPIV3Schema`)) {
          const at = e.indexOf(': ');
          errors.push({ field: e.slice(0, at), reason: 'FieldValueInvalid', message: e.slice(at + 2) });
        }
      });
    }
    if (errors.length === 0) return false;
    const qualified = `${rt.kind}${rt.group ? `.${rt.group}` : ''}`;
    const each = errors.map((e) => `${e.field}: ${e.message}`);
    sendStatus(res, 422, 'Invalid', `${qualified} "${obj.metadata?.name ?? ''}" is invalid: ${each.length === 1 ? each[0] : `[${each.join(', ')}]`}`, {
      name: obj.metadata?.name ?? '',
      group: rt.group,
      kind: rt.kind,
      causes: errors.map((e) => ({ reason: e.reason, message: e.message, field: e.field })),
    });
    return true;
  }

  function update(res: ServerResponse, rt: ResourceType, current: Obj, incoming: Obj, statusOnly: boolean, dryRun: boolean) {
    let next: Obj;
    if (statusOnly) {
      next = clone(current);
      if (incoming.status === undefined) delete next.status;
      else next.status = incoming.status;
    } else {
      next = clone(incoming);
      next.apiVersion = apiVersionOf(rt);
      next.kind = rt.kind;
      const meta = next.metadata ?? {};
      next.metadata = {
        ...meta,
        name: current.metadata.name,
        ...(current.metadata.namespace ? { namespace: current.metadata.namespace } : {}),
        uid: current.metadata.uid,
        creationTimestamp: current.metadata.creationTimestamp,
      };
      if (rt.statusSubresource) {
        if (current.status === undefined) delete next.status;
        else next.status = current.status;
      }
      if (rt.plural === 'secrets' && next.stringData) {
        next.data = { ...(next.data ?? {}) };
        for (const [k, v] of Object.entries(next.stringData as Record<string, string>)) next.data[k] = Buffer.from(v).toString('base64');
        delete next.stringData;
      }
      if (rt.schema) applyDefaults(next, rt.schema);
      if (rt.generation) {
        const gen = Number(current.metadata.generation ?? 1);
        const specChanged = JSON.stringify(withoutMetaStatus(current)) !== JSON.stringify(withoutMetaStatus(next));
        next.metadata.generation = specChanged ? gen + 1 : gen;
      } else {
        delete next.metadata.generation;
      }
    }
    next.metadata.resourceVersion = current.metadata.resourceVersion;
    if (refuse(res, rt, next, current)) return;
    if (JSON.stringify(next) === JSON.stringify(current)) return json(res, 200, current); // no-op: no new resourceVersion
    if (dryRun) return json(res, 200, next);
    return json(res, 200, put(rt, next, 'MODIFIED'));
  }

  /** The API server refuses a field selector on a field its kind does not index (400), and a malformed one. */
  function selectorError(rt: ResourceType, q: URLSearchParams): string | undefined {
    const fs = q.get('fieldSelector');
    if (!fs) return undefined;
    const known = new Set([...(rt.namespaced ? ['metadata.name', 'metadata.namespace'] : ['metadata.name']), ...(rt.fields ?? [])]);
    const unable = `Unable to find "${apiVersionOf(rt)}, Resource=${rt.plural}" that match label selector "${q.get('labelSelector') ?? ''}", field selector "${fs}"`;
    for (const term of fs.split(',')) {
      const m = term.trim().match(/^([^!=]+)(==|=|!=)(.*)$/);
      if (!m) return `invalid selector: '${fs}'; can't understand '${term}'`;
      if (!known.has(m[1]!.trim())) return `${unable}: field label not supported: ${m[1]!.trim()}`;
    }
    return undefined;
  }

  function selected(rt: ResourceType, ns: string | undefined, q: URLSearchParams): Obj[] {
    const match = matcher(q);
    return [...storeOf(rt).values()]
      .filter((o) => !ns || o.metadata.namespace === ns)
      .filter(match)
      .sort((a, b) => okey(a.metadata.namespace, a.metadata.name).localeCompare(okey(b.metadata.namespace, b.metadata.name)));
  }

  function watch(req: IncomingMessage, res: ServerResponse, rt: ResourceType, ns: string | undefined, q: URLSearchParams) {
    const from = q.get('resourceVersion');
    const match = matcher(q);
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'cache-control': 'no-cache' });
    res.flushHeaders();
    // kubectl get -w asks for Table rows, as for a list: each event then carries a one-row Table.
    const asTable = wantsTable(req);
    const send = (type: string, object: Obj) => {
      const body =
        asTable && (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') ? table(rt, [object], q, object.metadata.resourceVersion) : object;
      res.write(`${JSON.stringify({ type, object: body })}\n`);
    };
    if (from && from !== '0' && Number(from) < floor) {
      send('ERROR', {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `too old resource version: ${from} (${floor})`,
        reason: 'Expired',
        code: 410,
      });
      res.end();
      return;
    }
    if (!from || from === '0' || q.get('sendInitialEvents') === 'true') {
      for (const o of selected(rt, ns, q)) send('ADDED', o);
      // A watch-list (kubectl 1.35's wait and get -w): the state so far, then a bookmark that
      // says it is complete; clients wait for that mark before they judge a condition.
      if (q.get('sendInitialEvents') === 'true')
        send('BOOKMARK', {
          kind: rt.kind,
          apiVersion: apiVersionOf(rt),
          metadata: { resourceVersion: String(rv), annotations: { 'k8s.io/initial-events-end': 'true' } },
        });
    } else {
      for (const ev of history) {
        if (ev.rv <= Number(from) || ev.rt !== rt) continue;
        if (ns && ev.object.metadata.namespace !== ns) continue;
        const seen = asSeenBy(ev, match);
        if (seen) send(seen.type, seen.object);
      }
    }
    const w: Watcher = { rt, namespace: ns, match, send };
    watchers.add(w);
    openWatches.add(res);
    const timers: NodeJS.Timeout[] = [];
    if (q.get('allowWatchBookmarks') === 'true') {
      const t = setInterval(() => send('BOOKMARK', { kind: rt.kind, apiVersion: apiVersionOf(rt), metadata: { resourceVersion: String(rv) } }), bookmarkMs);
      timers.push(t);
    }
    const timeout = Number(q.get('timeoutSeconds') ?? 0);
    if (timeout > 0) timers.push(setTimeout(() => res.end(), timeout * 1000));
    const done = () => {
      watchers.delete(w);
      openWatches.delete(res);
      for (const t of timers) clearTimeout(t);
    };
    res.on('close', done);
    req.on('close', done);
  }

  /** The custom resources of one group version as the API server publishes them in OpenAPI v3. */
  function openapiDoc(group: string, version: string): Obj | undefined {
    const schemas: Obj = {};
    const paths: Obj = {};
    for (const t of types.values()) {
      if (!t.crd || !t.schema || t.group !== group || t.version !== version) continue;
      // The API server names a CRD's schema by its reversed group (tollgate.dev -> dev.tollgate).
      const name = `${group.split('.').reverse().join('.')}.${version}.${t.kind}`;
      // kubectl explain finds a resource's kind through its list path's GET operation.
      const gvk = { group, version, kind: t.kind };
      const list = `/apis/${group}/${version}${t.namespaced ? '/namespaces/{namespace}' : ''}/${t.plural}`;
      paths[list] = {
        get: {
          operationId: `list${t.kind}`,
          'x-kubernetes-action': 'list',
          'x-kubernetes-group-version-kind': gvk,
          responses: { '200': { description: 'OK', content: { 'application/json': { schema: { $ref: `#/components/schemas/${name}List` } } } } },
        },
      };
      const props = (t.schema.properties ?? {}) as Obj;
      schemas[name] = {
        ...t.schema,
        properties: {
          ...props,
          apiVersion: { type: 'string', description: 'APIVersion defines the versioned schema of this representation of an object.', ...props.apiVersion },
          kind: { type: 'string', description: 'Kind is a string value representing the REST resource this object represents.', ...props.kind },
          metadata: { type: 'object', description: "Standard object's metadata." },
        },
        'x-kubernetes-group-version-kind': [gvk],
      };
      schemas[`${name}List`] = {
        type: 'object',
        description: `${t.kind}List is a list of ${t.kind}`,
        required: ['items'],
        properties: { items: { type: 'array', items: { $ref: `#/components/schemas/${name}` } } },
        'x-kubernetes-group-version-kind': [{ group, version, kind: `${t.kind}List` }],
      };
    }
    if (Object.keys(schemas).length === 0) return undefined;
    return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.32.0' }, paths, components: { schemas } };
  }

  function openapiRoot() {
    const paths: Obj = {};
    for (const g of groupList().groups) {
      for (const v of g.versions) {
        const doc = openapiDoc(g.name, v.version);
        if (!doc) continue;
        // The hash lets clients cache a document until it changes.
        const hash = createHash('sha512').update(JSON.stringify(doc)).digest('hex').slice(0, 128).toUpperCase();
        paths[`apis/${g.name}/${v.version}`] = { serverRelativeURL: `/openapi/v3/apis/${g.name}/${v.version}?hash=${hash}` };
      }
    }
    return { paths };
  }

  function groupList() {
    const groups = new Map<string, Set<string>>();
    for (const t of types.values()) {
      if (!t.group) continue;
      if (!groups.has(t.group)) groups.set(t.group, new Set());
      groups.get(t.group)!.add(t.version);
    }
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: [...groups].map(([name, versions]) => {
        const vs = [...versions].map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
        return { name, versions: vs, preferredVersion: vs[0]! };
      }),
    };
  }

  function resourceList(group: string, version: string) {
    const resources: Obj[] = [];
    for (const t of types.values()) {
      if (t.group !== group || t.version !== version) continue;
      const verbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
      resources.push({
        name: t.plural,
        singularName: t.singular,
        namespaced: t.namespaced,
        kind: t.kind,
        verbs,
        ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
        ...(t.categories.length ? { categories: t.categories } : {}),
      });
      if (t.statusSubresource)
        resources.push({ name: `${t.plural}/status`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] });
    }
    return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources };
  }

  function table(rt: ResourceType, items: Obj[], q: URLSearchParams, resourceVersion: string) {
    const columns: Column[] = [{ name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace.' }, ...rt.columns];
    const includeObject = q.get('includeObject') ?? 'Metadata';
    return {
      kind: 'Table',
      apiVersion: 'meta.k8s.io/v1',
      metadata: { resourceVersion },
      columnDefinitions: columns.map((c) => ({
        name: c.name,
        type: c.type === 'date' ? 'string' : c.type,
        format: c.format ?? '',
        description: c.description ?? '',
        priority: c.priority ?? 0,
      })),
      rows: items.map((o) => ({
        cells: columns.map((c, i) => {
          if (i === 0) return o.metadata.name;
          const v = c.cell ? c.cell(o) : c.jsonPath ? jsonPath(o, c.jsonPath) : undefined;
          if (c.type === 'date') return typeof v === 'string' ? age(v) : '<unknown>';
          return v === undefined ? (c.type === 'string' ? '' : null) : v;
        }),
        object:
          includeObject === 'Object'
            ? o
            : includeObject === 'None'
              ? undefined
              : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
      })),
    };
  }

  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `http://${opts.host ?? '127.0.0.1'}:${port}`;

  // The namespaces a fresh cluster has.
  for (const name of ['default', 'kube-system']) put(types.get('/v1/namespaces')!, create(types.get('/v1/namespaces')!, { metadata: { name } }), 'ADDED');

  return {
    url,
    port,
    requests,
    async close() {
      for (const r of openWatches) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    compact() {
      // Resuming from the current version stays possible (nothing after it was dropped); any
      // older one gets 410. rv + 1 would also refuse the relist's own version, forever.
      floor = rv;
      history.length = 0;
    },
    dropWatches() {
      for (const r of openWatches) r.end();
    },
    get(apiVersion, plural, namespace, name) {
      const [g, v] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
      const o = stores.get(`${g}/${v}/${plural}`)?.get(okey(namespace, name));
      return o ? clone(o) : undefined;
    },
    list(apiVersion, plural, namespace) {
      const [g, v] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
      return [...(stores.get(`${g}/${v}/${plural}`)?.values() ?? [])].filter((o) => !namespace || o.metadata.namespace === namespace).map(clone);
    },
    resourceVersion: () => rv,
    async kubeconfig(path, namespace = 'default') {
      const { writeFile } = await import('node:fs/promises');
      await writeFile(
        path,
        `apiVersion: v1
kind: Config
clusters:
- name: kube-api
  cluster: {server: "${url}", insecure-skip-tls-verify: true}
users:
- name: test
  user: {token: test}
contexts:
- name: kube-api
  context: {cluster: kube-api, user: test, namespace: ${namespace}}
current-context: kube-api
`,
      );
      return path;
    },
  };
}

// ---------- helpers ----------

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

function clone<T>(v: T): T {
  return structuredClone(v);
}

function withoutMetaStatus(o: Obj): Obj {
  const { metadata: _m, status: _s, ...rest } = o;
  return rest;
}

function json(res: ServerResponse, code: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function text(res: ServerResponse, code: number, body: string) {
  res.writeHead(code, { 'content-type': 'text/plain' });
  res.end(body);
}

function sendStatus(res: ServerResponse, code: number, reason: string, message: string, details?: Obj) {
  json(res, code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code });
}

function wantsTable(req: IncomingMessage): boolean {
  const accept = req.headers.accept ?? '';
  // The first acceptable type wins; kubectl lists Table first when it wants one.
  const first = accept.split(',')[0] ?? '';
  return /as=Table/.test(first) && /g=meta\.k8s\.io/.test(first);
}

async function readRaw(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function readBody(req: IncomingMessage): Promise<string> {
  return (await readRaw(req)).toString('utf8');
}

function parseBody(body: string, req: IncomingMessage): Obj {
  const ct = req.headers['content-type'] ?? '';
  return (/yaml/.test(ct) ? parseYaml(body) : JSON.parse(body)) as Obj;
}

/**
 * Structural-schema defaulting as the API server does it: an absent property with a `default`
 * gets it, inside objects that exist (and in array items), never inside metadata.
 */
export function applyDefaults(value: unknown, schema: Obj | undefined, top = true): void {
  if (!schema || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) applyDefaults(item, schema.items as Obj | undefined, false);
    return;
  }
  const o = value as Obj;
  for (const [k, sub] of Object.entries((schema.properties ?? {}) as Record<string, Obj>)) {
    if (top && k === 'metadata') continue;
    if (o[k] === undefined && sub.default !== undefined) o[k] = clone(sub.default);
    applyDefaults(o[k], sub, false);
  }
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): any {
  if (!patch || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch);
  const out: Obj = target && typeof target === 'object' && !Array.isArray(target) ? (target as Obj) : {};
  for (const [k, v] of Object.entries(patch as Obj)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** RFC 6902 JSON patch (add, remove, replace, move, copy, test). */
export function jsonPatch(doc: Obj, ops: Obj[]): Obj {
  const parse = (p: string) =>
    p
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const parentOf = (root: Obj, path: string[]): [any, string] => {
    let cur: any = root;
    for (const s of path.slice(0, -1)) {
      if (cur === undefined || cur === null) throw new Error(`path not found`);
      cur = cur[Array.isArray(cur) ? Number(s) : s];
    }
    if (cur === undefined || cur === null) throw new Error('path not found');
    return [cur, path[path.length - 1]!];
  };
  const get = (root: Obj, path: string[]) => path.reduce<any>((c, s) => (c === undefined ? undefined : c[Array.isArray(c) ? Number(s) : s]), root);
  const add = (root: Obj, path: string[], value: unknown) => {
    const [p, k] = parentOf(root, path);
    if (Array.isArray(p)) p.splice(k === '-' ? p.length : Number(k), 0, value);
    else p[k] = value;
  };
  const del = (root: Obj, path: string[]) => {
    const [p, k] = parentOf(root, path);
    if (Array.isArray(p)) p.splice(Number(k), 1);
    else {
      if (!(k in p)) throw new Error(`path /${path.join('/')} not found`);
      delete p[k];
    }
  };
  for (const op of ops) {
    const path = parse(String(op.path));
    switch (op.op) {
      case 'add':
        add(doc, path, clone(op.value));
        break;
      case 'remove':
        del(doc, path);
        break;
      case 'replace':
        del(doc, path);
        add(doc, path, clone(op.value));
        break;
      case 'move': {
        const from = parse(String(op.from));
        const v = get(doc, from);
        del(doc, from);
        add(doc, path, v);
        break;
      }
      case 'copy':
        add(doc, path, clone(get(doc, parse(String(op.from)))));
        break;
      case 'test':
        if (JSON.stringify(get(doc, path)) !== JSON.stringify(op.value)) throw new Error(`test failed at ${String(op.path)}`);
        break;
      default:
        throw new Error(`unknown op ${String(op.op)}`);
    }
  }
  return doc;
}

/**
 * A change as a selective watch sees it (as the API server's watch cache does): an object that
 * starts to match is ADDED, one that stops matching is DELETED (its last matching state at the
 * new resourceVersion), one that never matched is not sent.
 */
function asSeenBy(ev: WatchEvent, match: (o: Obj) => boolean): { type: WatchEvent['type']; object: Obj } | undefined {
  const now = match(ev.object);
  if (ev.type !== 'MODIFIED' || !ev.prev) return now ? { type: ev.type, object: ev.object } : undefined;
  const before = match(ev.prev);
  if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: ev.object };
  if (!before) return undefined;
  const gone = clone(ev.prev);
  gone.metadata.resourceVersion = ev.object.metadata.resourceVersion;
  return { type: 'DELETED', object: gone };
}

/** label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors (the fields selectorError lets through). */
function matcher(q: URLSearchParams): (o: Obj) => boolean {
  const preds: ((o: Obj) => boolean)[] = [];
  const ls = q.get('labelSelector');
  if (ls) {
    for (const term of splitTerms(ls)) {
      const t = term.trim();
      let m: RegExpMatchArray | null;
      if ((m = t.match(/^([^\s!=]+)\s+(in|notin)\s+\((.*)\)$/))) {
        const [, k, op, vals] = m;
        const set = new Set(vals!.split(',').map((s) => s.trim()));
        preds.push((o) => {
          const v = o.metadata.labels?.[k!];
          return op === 'in' ? v !== undefined && set.has(v) : v === undefined || !set.has(v);
        });
      } else if ((m = t.match(/^([^\s!=]+)\s*(==|=|!=)\s*(.*)$/))) {
        const [, k, op, v] = m;
        preds.push((o) => (op === '!=' ? o.metadata.labels?.[k!] !== v : o.metadata.labels?.[k!] === v));
      } else if (t.startsWith('!')) {
        preds.push((o) => o.metadata.labels?.[t.slice(1)] === undefined);
      } else if (t) {
        preds.push((o) => o.metadata.labels?.[t] !== undefined);
      }
    }
  }
  const fs = q.get('fieldSelector');
  if (fs) {
    for (const term of fs.split(',')) {
      const m = term.trim().match(/^([^!=]+)(==|=|!=)(.*)$/);
      if (!m) continue;
      const [, field, op, value] = m;
      const get = (o: Obj) => field!.split('.').reduce<any>((c, s) => c?.[s], o);
      preds.push((o) => (op === '!=' ? String(get(o) ?? '') !== value : String(get(o) ?? '') === value));
    }
  }
  return (o) => preds.every((p) => p(o));
}

function splitTerms(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

/** The JSONPath subset printer columns use: .a.b, [n], [*], [?(@.k=="v")]. */
export function jsonPath(obj: unknown, path: string): unknown {
  const tokens = path.match(/\.[A-Za-z0-9_-]+|\[\?\(@\.[A-Za-z0-9_.-]+\s*==\s*["'][^"']*["']\)\]|\[\d+\]|\[\*\]/g) ?? [];
  let cur: unknown[] = [obj];
  for (const t of tokens) {
    const next: unknown[] = [];
    for (const c of cur) {
      if (c === undefined || c === null) continue;
      if (t.startsWith('.')) next.push((c as Obj)[t.slice(1)]);
      else if (t === '[*]') next.push(...(Array.isArray(c) ? c : []));
      else if (/^\[\d+\]$/.test(t)) next.push(Array.isArray(c) ? c[Number(t.slice(1, -1))] : undefined);
      else {
        const m = t.match(/^\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*["']([^"']*)["']\)\]$/)!;
        for (const e of Array.isArray(c) ? c : []) {
          const v = m[1]!.split('.').reduce<any>((x, s) => x?.[s], e);
          if (String(v) === m[2]) next.push(e);
        }
      }
    }
    cur = next.filter((x) => x !== undefined);
  }
  if (cur.length === 0) return undefined;
  return cur.length === 1 ? cur[0] : cur.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(' ');
}

/** Kubernetes' short age format: 42s, 5m, 3h, 2d. */
function age(ts: string | undefined): string {
  if (!ts) return '<unknown>';
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(ts)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 ? `${s % 60}s` : ''}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}
