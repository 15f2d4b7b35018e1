import type { IncomingMessage } from 'node:http';
import type { RuntimeGroup } from '../config/runtime.js';
import type { ChatProtocol } from '../billing/types.js';
import { GatewayError } from '../server/errors.js';
import { detectClaudeCode } from '../auth/claude-code.js';

/** ccOnly groups serve Claude Code only, and only on the endpoint it uses. */
export function checkClient(group: RuntimeGroup, req: IncomingMessage, body: Record<string, unknown>, protocol: ChatProtocol | 'count-tokens'): void {
  if (!group.ccOnly) return;
  if (protocol !== 'messages' && protocol !== 'count-tokens') {
    throw new GatewayError('client_restricted', `this key's group "${group.name}" is restricted to the Claude Code client, which uses /v1/messages only`);
  }
  const verdict = detectClaudeCode(req.headers, body);
  if (!verdict.claudeCode) {
    throw new GatewayError('client_restricted', `this key's group "${group.name}" is restricted to the Claude Code client (${verdict.reason}); use a key of a regular group for other clients`);
  }
}
