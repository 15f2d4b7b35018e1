import type { IrRequest } from '../ir/chat.js';
import type { Json } from '../ir/json.js';

/**
 * What the Anthropic and Bedrock wires share: turns that must alternate, and no field for an
 * answer format (it is asked for in the instructions instead).
 */

/** Appends a turn; consecutive turns of one role become one turn, as both wires want. */
export function pushTurn(messages: Json[], role: string, content: Json[]): void {
  if (content.length === 0) return;
  const last = messages.at(-1);
  if (last && last.role === role) (last.content as Json[]).push(...content);
  else messages.push({ role, content });
}

/** The instructions, with the answer format said in words when one was asked for. */
export function instructionsWithFormat(ir: IrRequest): string[] {
  const rf = ir.responseFormat;
  if (!rf) return [...ir.system];
  return [
    ...ir.system,
    rf.type === 'json_schema'
      ? `Answer with one JSON value only, no prose, that conforms to this JSON Schema:\n${JSON.stringify(rf.schema)}`
      : 'Answer with one JSON value only, no prose.',
  ];
}
