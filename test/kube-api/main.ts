import { parseArgs } from 'node:util';
import { startKubeApi } from './server.js';

/**
 * `npm run kube-api -- --port 8001 [--kubeconfig FILE] [--verbose]`: the in-memory Kubernetes API
 * for trying the operator and kubectl locally (plain HTTP, no auth, nothing persisted).
 */
const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8001' },
    host: { type: 'string', default: '127.0.0.1' },
    kubeconfig: { type: 'string' },
    verbose: { type: 'boolean', default: false },
  },
});
const api = await startKubeApi({ port: Number(values.port), host: values.host, verbose: values.verbose });
if (values.kubeconfig) await api.kubeconfig(values.kubeconfig);
process.stderr.write(`kube-api listening on ${api.url}${values.kubeconfig ? ` (kubeconfig: ${values.kubeconfig})` : ''}\n`);
const stop = () => {
  void api.close().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
