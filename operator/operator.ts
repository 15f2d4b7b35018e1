import { createHash, randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  ListWatch,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type Informer,
  type KubernetesObject,
  type ObjectCache,
  type V1Secret,
} from '@kubernetes/client-node';
import { compile, type CompileResult, type GatewayConfig, type RawResource } from '../api/snapshot/index.js';
import { API_VERSION, GROUP, KIND_INFO, KINDS, VERSION, type Kind } from '../api/v1alpha1/index.js';
import { DiscoveryServer } from './discovery-server.js';
import { eventBody, readyEventOf } from './events.js';
import { MINTED_LABEL, mintApiKey, mintedSecret, mintedSecretName, ownedBy, SECRET_DATA_KEY } from './mint.js';
import { LeaderElector, codeOf, errText } from './leader.js';
import { createLogger, type Logger } from '../kernel/log.js';
import { OperatorMetrics, serveMetrics } from './metrics.js';
import { WorkQueue } from './queue.js';
import { desiredReady, errorsByResource, nextStatus, readyChanged, refKey, type DesiredReady, type KubeObject } from './status.js';

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  /** Watch one namespace; undefined watches all. */
  namespace?: string;
  grpcPort?: number;
  grpcHost?: string;
  /** null disables the metrics/health server. */
  metricsPort?: number | null;
  metricsHost?: string;
  /** Bearer token proxies present (TOLLGATE_DISCOVERY_TOKEN). */
  token?: string;
  tlsCert?: string;
  tlsKey?: string;
  lease?: { namespace?: string; name?: string; identity?: string; durationMs?: number; retryMs?: number };
  debounceMs?: number;
  log?: Logger;
}

type Cache = Informer<KubernetesObject> & ObjectCache<KubernetesObject> & { latestResourceVersion?: () => string };

const COMPILE = 'compile';

/** The informer of the minted-key Secrets (label selector MINTED_LABEL). */
const MINTED = 'Secret(minted)';
/** The informer of one referenced Secret, watched by name. */
const secretWatchName = (namespace: string, name: string) => `Secret/${namespace}/${name}`;

type ListFn = () => Promise<{ items: KubernetesObject[]; metadata?: { resourceVersion?: string } }>;

/**
 * The controller: informers on ModelRoute, Group, ApiKey and the Secrets it needs feed a keyed
 * work queue;
 * one compile pass (pure) turns the cache into a GatewayConfig served over gRPC, and per-resource
 * items write Ready conditions (only when changed) and mint keys. Only the lease holder writes;
 * every replica compiles and serves snapshots.
 */
export class Operator {
  private readonly log: Logger;
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly caches = new Map<string, Cache>();
  private readonly synced = new Set<string>();
  /** Informers that have listed once or failed to: a referenced Secret's watch that cannot list does not hold up every snapshot. */
  private readonly settled = new Set<string>();
  /** The Secrets watched by name: "ns/name" -> informer name. */
  private readonly secretWatches = new Map<string, { namespace: string; name: string }>();
  /**
   * ApiKey ref -> its `<apikey>-key` Secret, found to exist without the minted label (a foreign
   * Secret, or one minted before Secrets carried it): watched by name while the ApiKey needs it.
   */
  private readonly unlabelled = new Map<string, { key: { namespace: string | undefined; name: string }; namespace: string; name: string }>();
  private readonly restartTimers = new Map<string, NodeJS.Timeout>();
  private readonly queue: WorkQueue;
  private readonly discovery: DiscoveryServer;
  private readonly leader: LeaderElector;
  readonly metrics = new OperatorMetrics();
  private metricsServer: Server | undefined;
  private result: CompileResult | undefined;
  private published: GatewayConfig | undefined;
  /** ApiKey ref -> why its Secret cannot be used (a Secret of that name not owned by it). */
  private readonly mintConflicts = new Map<string, string>();
  private stopped = false;
  private readonly id: string;
  private countedNacks = 0;
  private expiryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: OperatorOptions) {
    this.log = opts.log ?? createLogger({ component: 'operator' });
    this.custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
    this.queue = new WorkQueue((key) => this.handle(key), {
      debounceMs: opts.debounceMs ?? 50,
      onError: (key, err, retryIn) => {
        this.metrics.queueRetries.inc();
        this.log.warn('work item failed; retrying', { item: key, retryInMs: retryIn, error: errText(err) });
      },
    });
    this.discovery = new DiscoveryServer({
      token: opts.token,
      tlsCert: opts.tlsCert,
      tlsKey: opts.tlsKey,
      log: this.log.child({ component: 'discovery' }),
      onChange: () => this.updateProxyMetrics(),
    });
    const identity = opts.lease?.identity ?? `tollgate-operator-${randomBytes(4).toString('hex')}`;
    this.id = identity;
    this.leader = new LeaderElector(
      opts.kubeConfig.makeApiClient(CoordinationV1Api),
      {
        namespace: opts.lease?.namespace ?? opts.namespace ?? 'default',
        name: opts.lease?.name ?? 'tollgate-operator',
        identity,
        leaseDurationMs: opts.lease?.durationMs,
        retryMs: opts.lease?.retryMs,
        onStartedLeading: () => {
          this.metrics.leader.set(1);
          this.queue.add(COMPILE, 0); // write whatever status the last leader left undone
        },
        onStoppedLeading: () => this.metrics.leader.set(0),
      },
      this.log.child({ component: 'leader' }),
    );
  }

  identity(): string {
    return this.id;
  }

  isLeader(): boolean {
    return this.leader.isLeader();
  }

  /** True once every informer has listed and a snapshot was published. */
  ready(): boolean {
    return this.published !== undefined;
  }

  snapshot(): GatewayConfig | undefined {
    return this.published;
  }

  lastResult(): CompileResult | undefined {
    return this.result;
  }

  proxies() {
    return this.discovery.stats();
  }

  /** Starts the gRPC server, metrics, informers and leader election. Returns the bound ports. */
  async start(): Promise<{ grpcPort: number; metricsPort?: number }> {
    const grpcPort = await this.discovery.listen(this.opts.grpcPort ?? 50051, this.opts.grpcHost ?? '0.0.0.0');
    let metricsPort: number | undefined;
    if (this.opts.metricsPort !== null) {
      const m = await serveMetrics(this.metrics, this.opts.metricsPort ?? 9091, () => this.ready(), this.opts.metricsHost ?? '0.0.0.0');
      this.metricsServer = m.server;
      metricsPort = m.port;
    }
    const ns = this.opts.namespace;
    for (const kind of KINDS) {
      const { plural } = KIND_INFO[kind];
      const path = ns ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}` : `/apis/${GROUP}/${VERSION}/${plural}`;
      const list = () =>
        (ns
          ? this.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural })
          : this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as ReturnType<ListFn>;
      this.watch(kind, path, list);
    }
    // Secrets: never the namespace's whole set (Helm's release records, other apps' credentials).
    // The minted-key Secrets carry MINTED_LABEL, so one informer selects them by label; every
    // Secret a ModelRoute references is watched by name (watchReferencedSecrets).
    const labelSelector = MINTED_LABEL;
    this.watch(
      MINTED,
      ns ? `/api/v1/namespaces/${ns}/secrets` : '/api/v1/secrets',
      () => (ns ? this.core.listNamespacedSecret({ namespace: ns, labelSelector }) : this.core.listSecretForAllNamespaces({ labelSelector })),
      { labelSelector },
    );
    this.leader.start();
    this.log.info('operator started', { grpcPort, metricsPort, namespace: ns ?? '(all)', identity: this.id });
    return { grpcPort, metricsPort };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.queue.shutDown();
    clearTimeout(this.expiryTimer);
    for (const t of this.restartTimers.values()) clearTimeout(t);
    for (const c of this.caches.values()) await c.stop();
    await this.leader.stop();
    await this.discovery.close();
    if (this.metricsServer) {
      this.metricsServer.closeAllConnections();
      await new Promise<void>((resolve) => this.metricsServer!.close(() => resolve()));
    }
    this.log.info('operator stopped');
  }

  /** Resolves when no work is queued (tests). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  // ---------- informers ----------

  private watch(name: string, path: string, list: ListFn, selectors: { labelSelector?: string; fieldSelector?: string } = {}) {
    const informer = new ListWatch(path, new Watch(this.opts.kubeConfig), list, false, selectors.labelSelector, selectors.fieldSelector) as Cache;
    this.caches.set(name, informer);
    // A watch retired by stopSecretWatch must not restart.
    const live = () => !this.stopped && this.caches.get(name) === informer;
    const changed = () => this.queue.add(COMPILE);
    informer.on('add', changed);
    informer.on('update', changed);
    informer.on('delete', changed);
    let failures = 0;
    const begin = () => {
      if (!live()) return;
      informer
        .start()
        .then(() => {
          if (informer.latestResourceVersion?.()) {
            failures = 0;
            if (!this.synced.has(name)) {
              this.synced.add(name);
              this.settled.add(name);
              this.log.info('informer synced', { resource: name, objects: informer.list().length });
              this.queue.add(COMPILE, 0);
            }
          }
        })
        .catch((err: unknown) => this.log.warn('informer start failed', { resource: name, error: errText(err) }));
    };
    informer.on('error', (err: unknown) => {
      if (!live()) return;
      failures++;
      if (!this.settled.has(name)) {
        this.settled.add(name);
        this.queue.add(COMPILE, 0);
      }
      const wait = Math.min(5000, 100 * 2 ** Math.min(failures, 6));
      this.log.warn('watch failed; restarting', { resource: name, retryInMs: wait, error: errText(err) });
      clearTimeout(this.restartTimers.get(name));
      this.restartTimers.set(name, setTimeout(begin, wait));
    });
    begin();
    return informer;
  }

  /**
   * Keeps one watch per Secret that a ModelRoute references (list and watch with the field
   * selector metadata.name=NAME, as the kubelet watches the Secrets of its pods), plus the
   * unlabelled `<apikey>-key` Secrets that minting ran into; stops the watches no longer needed.
   * True when every needed Secret has been listed (or failed to), so a compile sees them all.
   */
  private watchReferencedSecrets(): boolean {
    const want = new Map<string, { namespace: string; name: string }>();
    const need = (namespace: string, name: string) => want.set(`${namespace}/${name}`, { namespace, name });
    const home = (o: KubeObject) => o.metadata.namespace ?? this.opts.namespace ?? 'default';
    for (const o of this.objects('ModelRoute')) {
      const backends: unknown[] = Array.isArray(o.spec?.backends) ? (o.spec.backends as unknown[]) : [];
      for (const b of backends) {
        const name = (b as { credentials?: { secretRef?: { name?: unknown } } } | null)?.credentials?.secretRef?.name;
        if (typeof name === 'string' && name) need(home(o), name);
      }
    }
    for (const [ref, secret] of this.unlabelled) {
      const key = this.find('ApiKey', secret.key.namespace, secret.key.name);
      if (!key || key.spec?.keyHash) this.unlabelled.delete(ref);
      else need(secret.namespace, secret.name);
    }
    for (const [k, ref] of want) if (!this.secretWatches.has(k)) this.watchSecret(k, ref.namespace, ref.name);
    for (const k of [...this.secretWatches.keys()]) if (!want.has(k)) void this.stopSecretWatch(k);
    return [...want.values()].every((ref) => this.settled.has(secretWatchName(ref.namespace, ref.name)));
  }

  private watchSecret(key: string, namespace: string, name: string) {
    this.secretWatches.set(key, { namespace, name });
    const fieldSelector = `metadata.name=${name}`;
    this.watch(
      secretWatchName(namespace, name),
      `/api/v1/namespaces/${namespace}/secrets`,
      () => this.core.listNamespacedSecret({ namespace, fieldSelector }),
      {
        fieldSelector,
      },
    );
  }

  private async stopSecretWatch(key: string) {
    const ref = this.secretWatches.get(key);
    if (!ref) return;
    this.secretWatches.delete(key);
    const name = secretWatchName(ref.namespace, ref.name);
    const informer = this.caches.get(name);
    this.caches.delete(name);
    this.synced.delete(name);
    this.settled.delete(name);
    clearTimeout(this.restartTimers.get(name));
    this.restartTimers.delete(name);
    await informer?.stop();
  }

  private objects(kind: string): KubeObject[] {
    return (this.caches.get(kind)?.list() ?? []) as unknown as KubeObject[];
  }

  private find(kind: string, namespace: string | undefined, name: string): KubeObject | undefined {
    if (kind === 'Secret') {
      const byName = this.caches.get(secretWatchName(namespace ?? this.opts.namespace ?? 'default', name))?.get(name, namespace);
      return (byName ?? this.caches.get(MINTED)?.get(name, namespace)) as unknown as KubeObject | undefined;
    }
    return this.caches.get(kind)?.get(name, namespace) as unknown as KubeObject | undefined;
  }

  // ---------- reconcile ----------

  private async handle(key: string): Promise<void> {
    if (key === COMPILE) return this.compilePass();
    const [what, kind, ns, name] = key.split('/') as [string, Kind, string, string];
    if (what === 'status') return this.writeStatus(kind, ns || undefined, name);
    if (what === 'mint') return this.mint(ns || undefined, name);
  }

  private secretValue(namespace: string | undefined, name: string, key: string): string | undefined {
    const s: (KubeObject & Pick<V1Secret, 'data'>) | undefined = this.find('Secret', namespace, name);
    const v = s?.data?.[key];
    return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
  }

  /** The hash of a minted key: its Secret exists and is owned by this ApiKey. */
  private mintedHash(key: KubeObject): string | undefined {
    const secret = this.find('Secret', key.metadata.namespace, mintedSecretName(key.metadata.name));
    if (!secret || !ownedBy(secret, key)) return undefined;
    const value = this.secretValue(key.metadata.namespace, mintedSecretName(key.metadata.name), SECRET_DATA_KEY);
    if (!value) return undefined;
    return `sha256:${createHash('sha256').update(value).digest('hex')}`;
  }

  private compilePass(): void {
    // A partial cache would publish a partial snapshot: wait for every informer's first list,
    // and for each newly referenced Secret's (its sync queues this pass again).
    if (![...KINDS, MINTED].every((k) => this.synced.has(k))) return;
    if (!this.watchReferencedSecrets()) return;
    this.metrics.reconciles.inc();
    const inputs: RawResource[] = [];
    const byRef = new Map<string, KubeObject>();
    for (const kind of KINDS) {
      for (const o of this.objects(kind)) {
        byRef.set(refKey(kind, o.metadata.namespace, o.metadata.name), o);
        inputs.push({
          object: { apiVersion: API_VERSION, kind, metadata: o.metadata, spec: o.spec },
          source: `${kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`,
        });
      }
    }
    const result = compile(inputs, {
      cluster: true,
      secret: (ns, name, key) => this.secretValue(ns, name, key),
      mintedKeyHash: (k) => {
        const obj = byRef.get(refKey('ApiKey', k.metadata.namespace, k.metadata.name));
        return obj ? this.mintedHash(obj) : undefined;
      },
    });
    this.result = result;
    this.scheduleExpiry();
    this.metrics.compileErrors.set(new Set(result.errors.map((e) => refKey(e.kind, e.namespace, e.name))).size);
    const config = result.config;
    if (this.published?.version !== config.version) {
      this.published = config;
      this.discovery.setSnapshot(config);
      this.metrics.setVersion(config.version);
      this.metrics.snapshotResources.set({ type: 'models' }, Object.keys(config.models).length);
      this.metrics.snapshotResources.set({ type: 'groups' }, Object.keys(config.groups).length);
      this.metrics.snapshotResources.set({ type: 'keys' }, Object.keys(config.keys).length);
      this.log.info('snapshot published', {
        version: config.version,
        models: Object.keys(config.models).length,
        groups: Object.keys(config.groups).length,
        keys: Object.keys(config.keys).length,
        errors: result.errors.length,
      });
      this.updateProxyMetrics();
    }
    if (!this.leader.isLeader()) return;
    for (const kind of KINDS) {
      for (const o of this.objects(kind)) {
        const ns = o.metadata.namespace ?? '';
        if (kind === 'ApiKey' && !o.spec?.keyHash && !this.mintedHash(o)) this.queue.add(`mint/ApiKey/${ns}/${o.metadata.name}`, 0);
        const want = this.desired(kind, o);
        if (want && this.statusChanged(kind, o, want)) this.queue.add(`status/${kind}/${ns}/${o.metadata.name}`, 0);
      }
    }
  }

  /**
   * A key that expires later leaves the snapshot (and turns Ready False) only on a recompile:
   * schedule one for the next expiry. Proxies also refuse an expired key on their own clock.
   */
  private scheduleExpiry(): void {
    clearTimeout(this.expiryTimer);
    const now = Date.now();
    const next = Math.min(
      ...this.objects('ApiKey')
        .map((o) => (typeof o.spec?.expiresAt === 'string' ? Date.parse(o.spec.expiresAt) : NaN))
        .filter((t) => t > now),
    );
    if (!Number.isFinite(next) || this.stopped) return;
    // setTimeout holds at most ~24.8 days; a later expiry is rescheduled by the pass this one triggers.
    this.expiryTimer = setTimeout(() => this.queue.add(COMPILE, 0), Math.min(next - now + 10, 2 ** 31 - 1));
    this.expiryTimer.unref();
  }

  private desired(kind: Kind, o: KubeObject): DesiredReady | undefined {
    if (!this.result) return undefined;
    const errors = errorsByResource(this.result.errors).get(refKey(kind, o.metadata.namespace, o.metadata.name)) ?? [];
    let keyPending: string | undefined;
    let keyConflict: string | undefined;
    if (kind === 'ApiKey' && !o.spec?.keyHash && !this.mintedHash(o)) {
      keyConflict = this.mintConflicts.get(refKey(kind, o.metadata.namespace, o.metadata.name));
      if (!keyConflict) keyPending = `waiting for the operator to mint the key into Secret "${mintedSecretName(o.metadata.name)}"`;
    }
    return desiredReady({ kind, object: o, errors, keyPending, keyConflict });
  }

  /** Status fields beside the Ready condition: a minted key's Secret, a route's model code. */
  private statusExtra(kind: Kind, o: KubeObject): Record<string, string> {
    if (kind === 'ModelRoute') return { model: typeof o.spec?.model === 'string' ? o.spec.model : o.metadata.name };
    if (kind !== 'ApiKey' || o.spec?.keyHash) return {};
    return this.mintedHash(o) ? { secretName: mintedSecretName(o.metadata.name) } : {};
  }

  private statusChanged(kind: Kind, o: KubeObject, want: DesiredReady): boolean {
    const extra = this.statusExtra(kind, o);
    return readyChanged(o.status, want) || Object.entries(extra).some(([k, v]) => o.status?.[k] !== v);
  }

  private async writeStatus(kind: Kind, namespace: string | undefined, name: string): Promise<void> {
    if (!this.leader.isLeader()) return;
    const o = this.find(kind, namespace, name);
    if (!o) return;
    const want = this.desired(kind, o);
    if (!want || !this.statusChanged(kind, o, want)) return;
    const status = nextStatus(o.status, want, new Date(), this.statusExtra(kind, o));
    try {
      await this.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: namespace ?? 'default', plural: KIND_INFO[kind].plural, name, body: { status } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    } catch (err) {
      if (codeOf(err) === 404) return; // deleted meanwhile
      throw err;
    }
    this.metrics.statusWrites.inc({ kind });
    this.log.info('status updated', {
      kind,
      namespace,
      name,
      ready: want.status,
      reason: want.reason,
      message: want.status === 'False' ? want.message : undefined,
    });
    const event = readyEventOf(
      o.status?.conditions?.find((c) => c.type === 'Ready'),
      want,
    );
    if (event) await this.recordEvent(kind, o, event);
  }

  /** Best effort: an Event that cannot be written is logged, never retried as a work item. */
  private async recordEvent(kind: string, o: KubeObject, e: { type: string; reason: string; message: string }): Promise<void> {
    try {
      await this.core.createNamespacedEvent({ namespace: o.metadata.namespace ?? 'default', body: eventBody(kind, o, e, this.id, new Date()) });
    } catch (err) {
      this.log.warn('could not record an event', { kind, name: o.metadata.name, reason: e.reason, error: errText(err) });
    }
  }

  private async mint(namespace: string | undefined, name: string): Promise<void> {
    if (!this.leader.isLeader()) return;
    const key = this.find('ApiKey', namespace, name);
    if (!key || key.spec?.keyHash || this.mintedHash(key)) return;
    const ref = refKey('ApiKey', namespace, name);
    const secretName = mintedSecretName(name);
    const ns = namespace ?? 'default';
    const existing = this.find('Secret', namespace, secretName);
    if (existing && !ownedBy(existing, key)) {
      this.conflict(ref, secretName);
      return;
    }
    const body = mintedSecret(key, ns, mintApiKey());
    try {
      await this.core.createNamespacedSecret({ namespace: ns, body });
    } catch (err) {
      if (codeOf(err) !== 409) throw err;
      // A Secret of that name without the minted label, so in no cache: a foreign one, or one
      // minted before Secrets carried the label. Watch it by name from now on.
      const current = await this.core.readNamespacedSecret({ name: secretName, namespace: ns });
      this.unlabelled.set(ref, { key: { namespace, name }, namespace: ns, name: secretName });
      if (!ownedBy(current as unknown as KubeObject, key)) this.conflict(ref, secretName);
      this.queue.add(COMPILE);
      return;
    }
    this.unlabelled.delete(ref);
    this.mintConflicts.delete(ref);
    this.metrics.keysMinted.inc();
    this.log.info('minted an API key', { apikey: `${ns}/${name}`, secret: secretName });
    await this.recordEvent('ApiKey', key, {
      type: 'Normal',
      reason: 'KeyMinted',
      message: `minted a key into Secret "${secretName}" (data key "${SECRET_DATA_KEY}")`,
    });
  }

  private conflict(ref: string, secretName: string) {
    const msg = `Secret "${secretName}" exists and is not owned by this ApiKey; delete it or set spec.keyHash`;
    // Once known, the Secret's own watch brings the next pass (when it is deleted, say): queueing
    // one here again would spin compile -> mint -> conflict.
    if (this.mintConflicts.get(ref) === msg) return;
    this.mintConflicts.set(ref, msg);
    this.log.warn('cannot mint an API key', { apikey: ref, reason: msg });
    this.queue.add(COMPILE);
  }

  private updateProxyMetrics() {
    const s = this.discovery.stats();
    this.metrics.proxiesConnected.set(s.connected);
    this.metrics.proxiesAcked.set(s.acked);
    if (this.discovery.nacks > this.countedNacks) {
      this.metrics.nacks.inc(this.discovery.nacks - this.countedNacks);
      this.countedNacks = this.discovery.nacks;
    }
  }
}
