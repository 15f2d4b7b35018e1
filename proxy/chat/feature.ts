import { PROTOCOLS } from '../protocols/index.js';
import type { Feature, GatewayDeps } from '../http/deps.js';
import { handleCountTokens } from './count-tokens.js';
import { handleChat } from './handler.js';
import { getModel, listModels, modelsShape } from './models.js';

/**
 * The chat endpoints, token counting and the model list. All of them take ccOnly keys: the
 * client policy (client-policy.ts) decides per endpoint and names the reason.
 */
export function chatFeature(deps: GatewayDeps): Feature {
  return {
    routes: [
      {
        method: 'POST',
        path: '/v1/chat/completions',
        shape: 'openai',
        auth: 'key-after-body',
        ccOnlyAware: true,
        lean: true,
        handler: (ctx) => handleChat(ctx, deps, PROTOCOLS['chat-completions']),
      },
      {
        method: 'POST',
        path: '/v1/responses',
        shape: 'openai',
        auth: 'key-after-body',
        ccOnlyAware: true,
        lean: true,
        handler: (ctx) => handleChat(ctx, deps, PROTOCOLS.responses),
      },
      {
        method: 'POST',
        path: '/v1/messages',
        shape: 'anthropic',
        auth: 'key-after-body',
        ccOnlyAware: true,
        lean: true,
        handler: (ctx) => handleChat(ctx, deps, PROTOCOLS.messages),
      },
      {
        method: 'POST',
        path: '/v1/messages/count_tokens',
        shape: 'anthropic',
        auth: 'key-after-body',
        ccOnlyAware: true,
        lean: true,
        handler: (ctx) => handleCountTokens(ctx, deps),
      },
      { method: 'GET', path: '/v1/models', shape: modelsShape, auth: 'key', ccOnlyAware: true, handler: listModels },
      { method: 'GET', path: '/v1/models/:id', name: '/v1/models/{id}', shape: modelsShape, auth: 'key', ccOnlyAware: true, handler: getModel },
    ],
  };
}
