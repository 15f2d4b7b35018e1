import { FolderConfigSource } from '../../proxy/config/folder-source.js';
import type { ConfigSource } from '../../proxy/config/source.js';
import { defaultBilling, defaultFeatures, afterStart } from '../../proxy/front/features.js';
import { startGateway } from '../../proxy/front/gateway.js';
import { createLogger, type Logger } from '../../kernel/log.js';
import { parseFlags, portFlag, UsageError, wholeFlag } from '../args.js';
import type { Command } from '../command.js';
import { standaloneKeys } from '../key-folders.js';
import { readSettingsOrExit } from '../settings.js';
import type { Settings } from '../../kernel/settings.js';
import type { Store } from '../../proxy/store/index.js';
import { untilSignal } from '../signals.js';

export const QUICKSTART_ADMIN_TOKEN = 'quickstart-admin';

export const command: Command = {
  summary: 'run the gateway (API and admin ports)',
  usage: `Usage: tollgate serve (--config DIR | --config-from grpc://HOST:PORT | --quickstart) [flags]

  --config DIR            ModelRoute/Group/ApiKey manifests (*.yaml, watched for changes)
  --config-from URL       receive config snapshots from the operator (grpc:// or grpcs://);
                          the stream token is TOLLGATE_DISCOVERY_TOKEN
  --discovery-ca FILE     with grpcs://: PEM CA that signed the operator's certificate
                          (default: the system roots)
  --quickstart            examples/quickstart + the simulator on 127.0.0.1:8090 + data in .tollgate/
                          (keys made by the console or keys create --out go to .tollgate/keys/)
  --host H                listen address (default 127.0.0.1; 0.0.0.0 in a container)
  --port N                API port (default 8080)
  --admin-port N          admin port: /healthz /readyz /metrics and the admin API (default 9090)
  --data DIR              embedded PostgreSQL (PGlite) and local results in DIR
  --database-url URL      PostgreSQL instead of PGlite (default: env DATABASE_URL)
  --redis-url URL         Redis for rate-limit counters shared by replicas (default: env REDIS_URL)
  --admin-token T         admin API bearer token (default: env TOLLGATE_ADMIN_TOKEN)
  --public-url URL        how clients reach this gateway (signed result URLs)
  --allow-loopback-urls   let webhooks and media URLs point at loopback addresses
  --body-limit BYTES      request body limit (default 33554432)
  --simulator-port N      with --quickstart: the simulator's port (default 8090)`,
  async run(argv) {
    const { values } = parseFlags(argv, {
      config: { type: 'string' },
      'config-from': { type: 'string' },
      'discovery-ca': { type: 'string' },
      quickstart: { type: 'boolean' },
      host: { type: 'string' },
      port: { type: 'string' },
      'admin-port': { type: 'string' },
      data: { type: 'string' },
      'database-url': { type: 'string' },
      'redis-url': { type: 'string' },
      'admin-token': { type: 'string' },
      'public-url': { type: 'string' },
      'allow-loopback-urls': { type: 'boolean' },
      'body-limit': { type: 'string' },
      'simulator-port': { type: 'string' },
    });
    const sources = [values.config, values['config-from'], values.quickstart].filter(Boolean).length;
    if (sources !== 1) throw new UsageError('give exactly one of --config DIR, --config-from grpc://HOST:PORT or --quickstart');
    if (values['discovery-ca'] && !values['config-from']) throw new UsageError('--discovery-ca goes with --config-from grpcs://HOST:PORT');
    const bodyLimit = wholeFlag('body-limit', values['body-limit'], 'bytes', 1);
    const port = portFlag('port', values.port, 8080);
    const adminPort = portFlag('admin-port', values['admin-port'], 9090);
    const settings = readSettingsOrExit(process.env);
    const log = createLogger({ component: 'gateway' }, settings.logLevel);
    const quickstart = values.quickstart === true;

    let simulator: { url: string; close(): Promise<void> } | undefined;
    let credentials = settings;
    if (quickstart) {
      const { startSimulator } = await import('../../simulator/index.js');
      simulator = await startSimulator({ port: portFlag('simulator-port', values['simulator-port'], 8090), host: '127.0.0.1' });
      log.info('simulator listening', { url: simulator.url });
      // The quickstart's models name their credentials as any route does ({env: SIM_...}); unless
      // the environment sets them, they are the simulator's own keys.
      const { quickstartCredentials } = await import('../../simulator/quickstart-credentials.js');
      const sim = quickstartCredentials(simulator.url);
      credentials = { ...settings, secretFromEnv: (name) => settings.secretFromEnv(name) ?? sim[name] };
    }

    const databaseUrl = values['database-url'] ?? settings.databaseUrl;
    const redisUrl = values['redis-url'] ?? settings.redisUrl;
    const dataDir = values.data ?? (quickstart && !databaseUrl ? '.tollgate' : undefined);
    if (dataDir) {
      const { mkdir } = await import('node:fs/promises');
      await mkdir(dataDir, { recursive: true });
    }
    // Standalone keys made by the console or `tollgate keys create --out`: the quickstart keeps
    // them in its data folder, out of the tracked examples/; --config DIR in DIR/keys.
    const keyManifests = values['config-from'] ? undefined : standaloneKeys(quickstart, values.config, dataDir);
    if (keyManifests) {
      const { mkdir } = await import('node:fs/promises');
      await mkdir(keyManifests.writeDir, { recursive: true });
    }

    const source: ConfigSource = values['config-from']
      ? await grpcSource(values['config-from'], values['discovery-ca'], settings, log)
      : new FolderConfigSource(
          keyManifests!.dirs,
          log,
          // The quickstart's routes name the simulator at its default address; --simulator-port moves them with it.
          quickstart && simulator ? { rewrite: rewriteTo(simulator.url) } : {},
        );
    // PGlite on a data folder never reaches stable storage by itself (it does not fsync): the
    // billing journal, O_DSYNC, is the durable point of charges there unless another one is set.
    const journaled =
      dataDir && !databaseUrl && !settings.billing.journalDir && !settings.billing.journalTable
        ? { ...credentials, billing: { ...settings.billing, journalDir: `${dataDir}/journal` } }
        : credentials;
    const adminToken = values['admin-token'] ?? settings.adminToken ?? (quickstart ? QUICKSTART_ADMIN_TOKEN : undefined);
    if (!adminToken) log.warn('no admin token set (--admin-token or TOLLGATE_ADMIN_TOKEN): the admin API uses a random one');

    // PGlite on a data folder is opened here: durable copies of it are kept (proxy/store/durable.ts),
    // and after a machine crash the last one is restored before anything starts.
    let store: Store | undefined;
    // PGlite's thread gone (a crash, its memory exhausted): every query would fail from then on,
    // so the gateway stops as on a signal, and exits 1 for its supervisor to start it again on
    // the same folder (charges of answers already sent are in the billing journal).
    let storeLost: (err: Error) => void = () => {};
    const lost = new Promise<Error>((resolve) => (storeLost = resolve));
    if (dataDir && !databaseUrl) {
      const { openStore } = await import('../../proxy/store/index.js');
      try {
        store = await openStore({
          dataDir: `${dataDir}/pg`,
          snapshotIntervalMs: settings.dataSnapshotMs,
          log: log.child({ component: 'store' }),
          onLost: (err) => storeLost(err),
        });
      } catch (err) {
        log.error('gateway failed to start', { error: (err as Error).message });
        await simulator?.close();
        throw err;
      }
    }

    // From here a signal is a request to stop once started: what starts after the gateway listens
    // (the quickstart's first grant, a store call) is not cut short by Node's default exit.
    const signalled = untilSignal();
    let gateway;
    try {
      gateway = await startGateway({
        source,
        ...(store ? { store } : { databaseUrl }),
        redisUrl,
        host: values.host,
        port,
        adminPort,
        adminToken,
        bodyLimitBytes: bodyLimit,
        log,
        settings: journaled,
        billing: defaultBilling,
        features: defaultFeatures,
        options: {
          ...(values['public-url'] ? { publicBaseURL: values['public-url'].replace(/\/+$/, '') } : {}),
          ...(dataDir ? { dataDir } : {}),
          ...(keyManifests ? { keyManifests } : {}),
          allowLoopbackURLs: quickstart || values['allow-loopback-urls'] === true,
        },
      });
    } catch (err) {
      // Nothing is left running: the ports, the data folder and the simulator are released.
      log.error('gateway failed to start', { error: (err as Error).message });
      await store?.close().catch(() => {});
      await simulator?.close();
      throw err;
    }
    await afterStart(gateway, { quickstart });

    const end = await Promise.race([signalled, lost]);
    if (end instanceof Error) log.error('the embedded database stopped; shutting down', { error: end.message });
    else log.info('shutting down', { signal: end });
    await gateway.close();
    await store?.close();
    await simulator?.close();
    return end instanceof Error ? 1 : 0;
  },
};

/** The operator as config source; a bad URL or CA flag is a usage error, not a crash. */
async function grpcSource(url: string, caFile: string | undefined, settings: Settings, log: Logger): Promise<ConfigSource> {
  const { GrpcConfigSource } = await import('../../proxy/config/grpc-source.js');
  try {
    return new GrpcConfigSource({
      url,
      caFile,
      token: settings.discoveryToken,
      ...(settings.podName ? { nodeId: settings.podName } : {}),
      log: log.child({ component: 'config' }),
    });
  } catch (err) {
    throw new UsageError(`--config-from: ${(err as Error).message}`);
  }
}

/** The quickstart's manifests with the simulator's default address replaced by where it listens. */
const rewriteTo = (url: string) => (text: string) => text.replaceAll('http://127.0.0.1:8090', url);
