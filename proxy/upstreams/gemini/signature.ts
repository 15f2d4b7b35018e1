import type { IrPart, IrRequest } from '../../ir/chat.js';

/**
 * Gemini's thought signatures travel through the IR as the signature of a reasoning part (the
 * one carrier every client protocol that keeps reasoning sends back: Anthropic's thinking
 * block). The prefix marks them Gemini's, so a signature another provider made is never sent to
 * Gemini (which refuses one it cannot read) and Gemini's own come back as they were.
 */
const PREFIX = 'gemini:';

export const toSignature = (sig: string): string => PREFIX + sig;

export function fromSignature(sig: string | undefined): string | undefined {
  return sig?.startsWith(PREFIX) && sig.length > PREFIX.length ? sig.slice(PREFIX.length) : undefined;
}

/** The request without Gemini's signed reasoning, for a provider that would refuse a signature it did not make. */
export function withoutGeminiReasoning(ir: IrRequest): IrRequest {
  const foreign = (p: IrPart) => p.type === 'reasoning' && p.signature?.startsWith(PREFIX) === true;
  if (!ir.messages.some((m) => m.content.some(foreign))) return ir;
  return { ...ir, messages: ir.messages.map((m) => ({ ...m, content: m.content.filter((p) => !foreign(p)) })) };
}
