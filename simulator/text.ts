/**
 * Deterministic answers: the same prompt gives the same words, so tests can compare what the
 * client received with what the simulator sent. One word is one output token.
 */
const WORDS = [
  'the',
  'gateway',
  'simulator',
  'answers',
  'every',
  'request',
  'with',
  'plain',
  'words',
  'so',
  'that',
  'tests',
  'can',
  'count',
  'tokens',
  'exactly',
  'and',
  'streams',
  'arrive',
  'in',
  'small',
  'pieces',
  'one',
  'word',
  'at',
  'a',
  'time',
  'until',
  'done',
];

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

/** n words (default 12) chosen by the prompt. Each word after the first carries its leading space. */
export function answerWords(prompt: string, n = 12): string[] {
  const out: string[] = [];
  let h = hash(prompt);
  for (let i = 0; i < n; i++) {
    h = Math.imul(h ^ (h >>> 15), 2246822507) >>> 0;
    const w = WORDS[h % WORDS.length]!;
    out.push(i === 0 ? w[0]!.toUpperCase() + w.slice(1) : ` ${w}`);
  }
  if (out.length > 0) out[out.length - 1] += '.';
  return out;
}

/** Input tokens of a request: about four bytes of its text a token, at least 1. */
export function countInputTokens(text: string): number {
  // As real tokenizers do: about 4 characters a token for English and code, about one token a
  // character for CJK and other scripts.
  let ascii = 0;
  let other = 0;
  for (const ch of text) {
    if (ch.charCodeAt(0) < 0x80) ascii++;
    else other++;
  }
  return Math.max(1, Math.ceil(ascii / 4) + other);
}

/** All text of a content value: a string, or an array of blocks with `text`. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const block of content) {
    if (block && typeof block === 'object') {
      const b = block as Record<string, unknown>;
      if (typeof b.text === 'string') out += (out ? '\n' : '') + b.text;
      else if (typeof b.content === 'string') out += (out ? '\n' : '') + b.content;
    }
  }
  return out;
}

let counter = 0;
/** Ids in the provider's style, unique per process: chatcmpl-sim-1a2b... */
export function simId(prefix: string): string {
  counter = (counter + 1) % 0x7fffffff;
  return `${prefix}${Date.now().toString(36)}${counter.toString(36)}`;
}
