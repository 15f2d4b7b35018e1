import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fateTable } from '../../proxy/protocols/fates.js';

describe('docs/translation.md', () => {
  it('lists every field of every client protocol with the fate the code gives it', () => {
    const doc = readFileSync(new URL('../../docs/translation.md', import.meta.url), 'utf8');
    const rows = (s: string) => s.split('\n').filter((l) => /^\| (chat-completions|messages|responses) \| `/.test(l));
    expect(rows(doc)).toEqual(rows(fateTable()));
  });
});
