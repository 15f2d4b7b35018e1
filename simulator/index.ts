import { anthropicMessagesRoutes } from './anthropic-messages.js';
import { azureOpenaiRoutes } from './azure-openai.js';
import { bedrockConverseRoutes } from './bedrock-converse.js';
import { compatibleDeepseekRoutes } from './compatible-deepseek.js';
import { geminiGenerateRoutes } from './gemini-generate.js';
import { geminiVertexRoutes } from './gemini-vertex.js';
import { mediaRoutes } from './media-routes.js';
import { mediaProviderRoutes } from './media-providers.js';
import { openaiChatRoutes } from './openai-chat.js';
import { openaiResponsesRoutes } from './openai-responses.js';
import { startSimulatorServer, type Simulator, type SimRoute } from './server.js';

export type { Simulator, SimRoute } from './server.js';
export type { RecordedRequest } from './recorder.js';

export interface StartSimulatorOptions {
  port?: number;
  host?: string;
  /** Delay before the first byte of every answer (ms). */
  latencyMs?: number;
  /** Delay between stream events (ms). */
  chunkDelayMs?: number;
}

/** Every protocol the simulator speaks, in one list. */
export const ROUTES: SimRoute[] = [
  ...openaiChatRoutes,
  ...openaiResponsesRoutes,
  ...anthropicMessagesRoutes,
  ...mediaRoutes,
  ...mediaProviderRoutes,
  ...geminiGenerateRoutes,
  ...azureOpenaiRoutes,
  ...bedrockConverseRoutes,
  ...geminiVertexRoutes,
  ...compatibleDeepseekRoutes,
];

export function startSimulator(opts: StartSimulatorOptions = {}): Promise<Simulator> {
  return startSimulatorServer({ ...opts, routes: ROUTES });
}
