import { existsSync } from 'node:fs';
import { parseFlags, portFlag, UsageError, wholeFlag } from '../args.js';
import type { Command } from '../command.js';
import { readSettingsOrExit } from '../settings.js';
import { untilSignal } from '../signals.js';

export const command: Command = {
  summary: 'run the Kubernetes operator (CRDs -> config snapshots over gRPC)',
  usage: `Usage: tollgate operator [flags]

Watches ModelRoute, Group and ApiKey resources (and the Secrets they reference), compiles them
into one versioned config snapshot and streams it to proxies (tollgate serve --config-from).
Writes Ready conditions, mints keys for ApiKeys without keyHash; only the Lease holder writes.

  --namespace NS        watch one namespace (default: all namespaces)
  --kube-server URL     Kubernetes API URL, no credentials (the kube-API test server);
                        else --kubeconfig, KUBECONFIG, ~/.kube/config or the in-cluster account
  --kubeconfig FILE     kubeconfig file to use
  --grpc-host H         config discovery listen address (default 0.0.0.0)
  --grpc-port N         config discovery port (default 50051)
  --metrics-host H      /metrics /healthz /readyz listen address (default 0.0.0.0)
  --metrics-port N      metrics and health port (default 9091)
  --lease-name NAME     coordination.k8s.io Lease for leader election (default tollgate-operator)
  --lease-namespace NS  namespace of the Lease (default: --namespace, POD_NAMESPACE or default)
  --identity ID         this replica's name in the Lease (default: POD_NAME or a random name)
  --tls-cert FILE       serve config discovery over TLS with this PEM certificate ...
  --tls-key FILE        ... and this PEM private key (proxies then use grpcs://)
  --debounce-ms N       how long a burst of changes is collected before one recompile (default 50)

The token proxies must present is TOLLGATE_DISCOVERY_TOKEN (unset: any client is accepted).`,
  async run(argv) {
    const { values } = parseFlags(argv, {
      namespace: { type: 'string' },
      'kube-server': { type: 'string' },
      kubeconfig: { type: 'string' },
      'grpc-host': { type: 'string' },
      'grpc-port': { type: 'string' },
      'metrics-host': { type: 'string' },
      'metrics-port': { type: 'string' },
      'lease-name': { type: 'string' },
      'lease-namespace': { type: 'string' },
      identity: { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'debounce-ms': { type: 'string' },
    });
    if (values['kube-server'] && values.kubeconfig) throw new UsageError('give --kube-server or --kubeconfig, not both');
    if (values['kube-server'] && !/^https?:\/\/[^/]+/.test(values['kube-server']))
      throw new UsageError(`--kube-server must be an http(s):// URL, got "${values['kube-server']}"`);
    if (Boolean(values['tls-cert']) !== Boolean(values['tls-key'])) throw new UsageError('--tls-cert and --tls-key go together');
    for (const f of ['kubeconfig', 'tls-cert', 'tls-key'] as const) {
      const file = values[f];
      if (file && !existsSync(file)) throw new UsageError(`--${f}: ${file} does not exist`);
    }
    const debounce = wholeFlag('debounce-ms', values['debounce-ms'], 'milliseconds');
    const grpcPort = portFlag('grpc-port', values['grpc-port'], 50051);
    const metricsPort = portFlag('metrics-port', values['metrics-port'], 9091);

    // Loaded only here: the Kubernetes client is the operator's alone.
    const { KubeConfig } = await import('@kubernetes/client-node');
    const { Operator } = await import('../../operator/operator.js');
    const { createLogger } = await import('../../kernel/log.js');
    const settings = readSettingsOrExit(process.env);
    const kubeConfig = new KubeConfig();
    if (values['kube-server']) {
      kubeConfig.loadFromOptions({
        // client-node refuses plain HTTP unless TLS verification is off; over http there is none to do.
        clusters: [{ name: 'cluster', server: values['kube-server'], skipTLSVerify: values['kube-server'].startsWith('http:') }],
        users: [{ name: 'operator' }],
        contexts: [{ name: 'operator', cluster: 'cluster', user: 'operator' }],
        currentContext: 'operator',
      });
    } else if (values.kubeconfig) kubeConfig.loadFromFile(values.kubeconfig);
    else kubeConfig.loadFromDefault();

    const log = createLogger({ component: 'operator' }, settings.logLevel);
    const operator = new Operator({
      kubeConfig,
      namespace: values.namespace,
      grpcHost: values['grpc-host'],
      grpcPort,
      metricsHost: values['metrics-host'],
      metricsPort,
      token: settings.discoveryToken,
      tlsCert: values['tls-cert'],
      tlsKey: values['tls-key'],
      lease: {
        name: values['lease-name'],
        namespace: values['lease-namespace'] ?? values.namespace ?? settings.podNamespace,
        identity: values.identity ?? settings.podName,
      },
      debounceMs: debounce,
      log,
    });
    await operator.start();
    const signal = await untilSignal();
    log.info('shutting down', { signal });
    await operator.stop();
    return 0;
  },
};
