import type { IncomingMessage } from 'node:http';
import type { RuntimeGroup } from '../config/runtime.js';
import type { ChatProtocol } from '../ir/protocol.js';
import { GatewayError } from '../../kernel/errors.js';
import { detectClaudeCode } from '../auth/claude-code.js';

/** What a chat-feature request does, for the client policy. */
export type ClientOperation = ChatProtocol | 'count-tokens' | 'models';

/**
 * ccOnly groups serve Claude Code only, and only on the endpoints it uses (/v1/messages,
 * /v1/messages/count_tokens, /v1/models). The decision is the detector's (auth/claude-code.ts).
 */
export function checkClient(group: RuntimeGroup, req: IncomingMessage, body: Record<string, unknown>, op: ClientOperation): void {
  if (!group.ccOnly) return;
  if (op === 'chat-completions' || op === 'responses') {
    throw new GatewayError(
      'client_restricted',
      `this key's group "${group.name}" is restricted to the Claude Code client, which uses /v1/messages only; use a key of a regular group for other clients`,
    );
  }
  const verdict = detectClaudeCode(req.headers, body);
  if (!verdict.claudeCode) {
    throw new GatewayError(
      'client_restricted',
      `this key's group "${group.name}" is restricted to the Claude Code client (${verdict.reason}); use a key of a regular group for other clients`,
    );
  }
}
