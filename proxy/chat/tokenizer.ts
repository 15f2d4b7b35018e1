import type { IrRequest } from '../ir/chat.js';
import type { CompiledBackend } from '../upstreams/types.js';

/**
 * Counting a request's tokens where the model family's tokenizer is public: OpenAI's o200k_base
 * (GPT-4o, GPT-4.1, GPT-5, the o-series, gpt-oss). The tokenizer (~70 MB) loads on first use
 * only. Chat framing adds a few tokens per message, as OpenAI documents for its chat format.
 */
const O200K = /^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o\d|chatgpt-|codex-|gpt-oss)/i;

/** The public tokenizer of the model a backend serves, if there is one. */
export function tokenizerOf(backend: CompiledBackend): 'o200k_base' | undefined {
  return O200K.test(backend.model.replace(/^.*\//, '')) ? 'o200k_base' : undefined;
}

let loaded: Promise<(text: string) => number> | undefined;
const counter = () => (loaded ??= import('gpt-tokenizer/encoding/o200k_base').then((m) => (text: string) => m.countTokens(text)));

const PER_MESSAGE = 3;
const PRIMING = 3;

/** The input tokens of a request as o200k_base counts them: instructions, turns, tool calls and results, tool definitions. */
export async function countTokens(ir: IrRequest): Promise<number> {
  const count = await counter();
  let n = PRIMING;
  for (const s of ir.system) n += PER_MESSAGE + count(s);
  for (const m of ir.messages) {
    n += PER_MESSAGE;
    for (const p of m.content) {
      if (p.type === 'text' || p.type === 'reasoning') n += count(p.text);
      else if (p.type === 'tool_call') n += count(p.name) + count(p.arguments);
      else if (p.type === 'tool_result') n += PER_MESSAGE + count(p.content);
    }
  }
  if (ir.tools.length) n += count(JSON.stringify(ir.tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }))));
  return n;
}
