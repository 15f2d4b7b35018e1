import type { IrMessage, IrPart, IrStreamPart } from '../ir/chat.js';
import type { Queryable } from '../store/index.js';

/**
 * The conversations behind translated Responses answers, so that `previous_response_id` works on
 * a backend that keeps no server-side state (Anthropic, a Chat Completions server): each answer's
 * conversation (its turns and the answer, not the instructions: Responses does not carry those
 * over) is kept under the id the client saw, for its key only, until it expires.
 */
export interface Owner {
  account: string;
  keyName: string;
}

/** The turns of a kept response, or undefined when this key holds no such (unexpired) response. */
export async function loadConversation(q: Queryable, id: string, owner: Owner): Promise<IrMessage[] | undefined> {
  const r = await q.query<{ conversation: unknown }>(
    'SELECT conversation FROM translated_responses WHERE id = $1 AND account = $2 AND key_name = $3 AND expires_at > now()',
    [id, owner.account, owner.keyName],
  );
  const c = r.rows[0]?.conversation;
  // pg parses JSONB; PGlite does too, but a driver may hand back the text.
  const parsed = (typeof c === 'string' ? JSON.parse(c) : c) as { messages?: IrMessage[] } | undefined;
  return parsed?.messages;
}

/** Keeps `messages` (the request's turns and the answer) under `id`; now and then clears what has expired. */
export async function keepConversation(q: Queryable, id: string, owner: Owner, model: string, messages: IrMessage[], ttlMs: number): Promise<void> {
  await q.query(
    `INSERT INTO translated_responses (id, account, key_name, model, conversation, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (id) DO UPDATE SET conversation = EXCLUDED.conversation, expires_at = EXCLUDED.expires_at`,
    [id, owner.account, owner.keyName, model, JSON.stringify({ messages }), new Date(Date.now() + ttlMs).toISOString()],
  );
  // About one save in 500 sweeps, so the table holds what has expired only briefly.
  if (Math.random() < 0.002) await q.query('DELETE FROM translated_responses WHERE expires_at < now()');
}

/** The answer a stream carried, as the parts of one assistant turn (text and reasoning joined per block). */
export function answerOf(parts: readonly IrStreamPart[]): IrPart[] {
  const blocks = new Map<number, IrPart>();
  for (const p of parts) {
    switch (p.type) {
      case 'text':
      case 'reasoning': {
        const b = blocks.get(p.index);
        if (b && b.type === p.type) b.text += p.delta;
        else blocks.set(p.index, { type: p.type, text: p.delta });
        break;
      }
      case 'reasoning_signature': {
        const b = blocks.get(p.index);
        if (b?.type === 'reasoning') b.signature = (b.signature ?? '') + p.signature;
        break;
      }
      case 'tool_call_start':
        blocks.set(p.index, { type: 'tool_call', id: p.id, name: p.name, arguments: '' });
        break;
      case 'tool_call_delta': {
        const b = blocks.get(p.index);
        if (b?.type === 'tool_call') b.arguments += p.arguments;
        break;
      }
      default:
        break;
    }
  }
  return [...blocks.entries()].sort((a, b) => a[0] - b[0]).map(([, part]) => part);
}
