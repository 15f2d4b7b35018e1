import { CHAT_FATES, CHAT_MAPPED } from './chat-completions/codec.js';
import { MESSAGES_FATES, MESSAGES_MAPPED } from './messages/codec.js';
import { RESPONSES_FATES, RESPONSES_MAPPED } from './responses/codec.js';

/**
 * What translation does with each request field of each client protocol (docs/translation.md is
 * checked against this by a test). `mapped` fields travel through the IR; the others are refused
 * (a 400 naming them: dropping them would change the answer) or dropped and named in
 * x-tollgate-dropped-fields (hints). A field in none of these lists is dropped and named.
 */
export const FIELD_FATES = {
  'chat-completions': { mapped: CHAT_MAPPED, other: CHAT_FATES },
  messages: {
    mapped: MESSAGES_MAPPED,
    other: {
      ...MESSAGES_FATES,
      cache_control: {
        fate: 'dropped' as const,
        why: 'a caching hint: carried to Anthropic wires (Vertex) and as Bedrock cache points; other backends cache by themselves or not at all',
      },
    },
  },
  responses: { mapped: RESPONSES_MAPPED, other: RESPONSES_FATES },
} as const;

/** The table of docs/translation.md, one row a field. */
export function fateTable(): string {
  const rows = ['| client protocol | field | fate | why |', '|---|---|---|---|'];
  for (const [protocol, f] of Object.entries(FIELD_FATES)) {
    for (const field of f.mapped) rows.push(`| ${protocol} | \`${field}\` | mapped | travels through the IR |`);
    for (const [field, o] of Object.entries(f.other as Record<string, { fate: string; why: string }>))
      rows.push(`| ${protocol} | \`${field}\` | ${o.fate} | ${o.why} |`);
  }
  return rows.join('\n');
}
