import type { ChatProtocol } from '../ir/protocol.js';
import { chatCompletions } from './chat-completions/index.js';
import { messages } from './messages/index.js';
import { responses } from './responses/index.js';
import type { ProtocolAdapter } from './types.js';

export const PROTOCOLS: Record<ChatProtocol, ProtocolAdapter> = {
  'chat-completions': chatCompletions,
  responses,
  messages,
};

export type { ChatRequestInfo, ProtocolAdapter, StreamTap } from './types.js';
export { clientCodec, type ClientChatCodec, type ClientDecoded } from './translation.js';
