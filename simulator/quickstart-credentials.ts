import { SIM_AWS_KEYS } from './bedrock-converse.js';
import { simServiceAccount } from './gemini-vertex.js';

/**
 * The credentials the quickstart's provider models name (`credentials: {env: SIM_...}` in
 * examples/quickstart/models.yaml): the simulator's own keys, none of them a secret. `tollgate
 * serve --quickstart` gives each of these names this value unless the environment sets it, so
 * the quickstart authenticates as a real deployment does (a Google service account key exchanged
 * for tokens at the simulator's token_uri, SigV4-signed Bedrock calls) and no route header holds
 * a key.
 */
export function quickstartCredentials(simUrl: string): Record<string, string> {
  return {
    SIM_GEMINI_API_KEY: 'sim-quickstart-key',
    SIM_VERTEX_SERVICE_ACCOUNT: JSON.stringify(simServiceAccount(simUrl)),
    SIM_BEDROCK_KEYS: `${SIM_AWS_KEYS.accessKeyId}:${SIM_AWS_KEYS.secretAccessKey}`,
    SIM_AZURE_API_KEY: 'sim-quickstart-key',
    SIM_DEEPSEEK_API_KEY: 'sim-quickstart-key',
  };
}
