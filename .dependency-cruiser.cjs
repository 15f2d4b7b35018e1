// The import rules of DESIGN.md ("Layout"), checked by `npm run lint`. A wrong arrow fails CI.
//
// Inside proxy/, folders are layered from the front door down: a folder may import only the
// folders after it in LAYERS. protocols/* and upstreams/* meet only through ir/.
const LAYERS = [
  'front', // node:http servers, pipeline, error rendering, composition
  'admin', // admin API routes and the consoles' aggregate queries (they read tasks, webhooks, billing)
  'chat', // the chat exchange
  'tasks', // image and video task engine
  'http', // request context, body reading, JSON answers, feature deps
  'auth', // keys, client restriction, rate limits
  'billing', // ledger, leases, group commit, journal: no HTTP
  'config', // snapshot sources and the runtime form of the config
  'webhooks', // signing, outbox, delivery
  'protocols', // client protocols: wire <-> IR
  'upstreams', // providers: wire <-> IR, task adapters, the one registry
  'ir', // the neutral representation
  'sse', // byte-level SSE
  'net', // URL guard
  'store', // database access and migrations
  'metrics', // prom-client registry
];

const PROD = { pathNot: '\\.test\\.ts$' };

const layerRules = LAYERS.map((layer, i) => {
  const above = LAYERS.slice(0, i);
  return {
    name: `proxy-${layer}-imports-down`,
    comment: `proxy/${layer}/ may import only folders below it: ${LAYERS.slice(i + 1).join(', ') || 'none'}`,
    severity: 'error',
    from: { path: `^proxy/${layer}/`, ...PROD },
    to: { path: above.length ? `^proxy/(${above.join('|')})/` : '^$' },
  };
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Import cycles make the layering meaningless.',
      severity: 'error',
      from: PROD,
      to: { circular: true },
    },
    {
      name: 'kernel-imports-nothing',
      comment: 'kernel/ is the bottom: errors, log, settings. It imports nothing of the repository.',
      severity: 'error',
      from: { path: '^kernel/' },
      to: { path: '^(api|operator|proxy|cli|simulator|test|bench)/' },
    },
    {
      name: 'api-imports-kernel-only',
      severity: 'error',
      from: { path: '^api/', ...PROD },
      to: { path: '^(operator|proxy|cli|simulator|bench)/' },
    },
    {
      name: 'operator-not-proxy',
      comment: 'The operator imports api/ and kernel/ only.',
      severity: 'error',
      from: { path: '^operator/', ...PROD },
      to: { path: '^(proxy|cli|simulator|bench)/' },
    },
    {
      name: 'proxy-sees-snapshot-only',
      comment: 'The data plane knows the compiled snapshot, never the CRD types or a Kubernetes client.',
      severity: 'error',
      from: { path: '^proxy/', ...PROD },
      to: { path: '^(api/v1alpha1|operator|cli|simulator|bench)/|@kubernetes/client-node' },
    },
    {
      name: 'protocols-not-upstreams',
      comment: 'Client protocols and upstream providers meet only through ir/.',
      severity: 'error',
      from: { path: '^proxy/protocols/' },
      to: { path: '^proxy/upstreams/' },
    },
    {
      name: 'upstreams-not-protocols',
      comment: 'Client protocols and upstream providers meet only through ir/.',
      severity: 'error',
      from: { path: '^proxy/upstreams/' },
      to: { path: '^proxy/protocols/' },
    },
    {
      name: 'billing-sees-no-wire',
      comment: 'Billing sees IR usage and snapshot prices, never a wire format.',
      severity: 'error',
      from: { path: '^proxy/billing/' },
      to: { path: '^proxy/(protocols|upstreams|sse)/' },
    },
    {
      name: 'billing-one-face',
      comment: 'Billing is reached one way: through proxy/billing/index.ts, never its inner files.',
      severity: 'error',
      from: { path: '^proxy/', pathNot: '^proxy/billing/|\\.test\\.ts$' },
      to: { path: '^proxy/billing/', pathNot: '^proxy/billing/index\\.ts$' },
    },
    {
      name: 'only-tests-import-test',
      comment: 'Nothing outside test/ imports test/ (co-located unit tests included).',
      severity: 'error',
      from: { pathNot: '^test/' },
      to: { path: '^test/' },
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
