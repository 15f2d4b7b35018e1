/** The README as a newcomer reads it: its sections and the fenced blocks in them. */

export interface Block {
  lang: string;
  code: string;
  /** The `## ` section it is in ('' before the first). */
  section: string;
  line: number;
}

export function fencedBlocks(markdown: string): Block[] {
  const out: Block[] = [];
  let section = '';
  let open: { lang: string; line: number; lines: string[] } | undefined;
  markdown.split('\n').forEach((text, i) => {
    if (open) {
      if (text.startsWith('```')) {
        out.push({ lang: open.lang, code: open.lines.join('\n'), section, line: open.line });
        open = undefined;
      } else open.lines.push(text);
      return;
    }
    if (text.startsWith('## ')) section = text.slice(3).trim();
    const fence = /^```(\w*)/.exec(text);
    if (fence) open = { lang: fence[1] ?? '', line: i + 1, lines: [] };
  });
  return out;
}

/**
 * The JSON answers a block shows as comments (`# {...}`, continued on `#  ...` lines), as
 * patterns: `…` stands for any text within one JSON object.
 */
export function shownAnswers(code: string): RegExp[] {
  const shown: string[] = [];
  for (const line of code.split('\n')) {
    const m = /^#\s?(\s*)(.*)$/.exec(line.trim());
    if (!m) continue;
    const text = m[2]!;
    if (text.startsWith('{') && !m[1]) shown.push(text);
    else if (m[1] && shown.length > 0 && !shown.at(-1)!.endsWith('}')) shown[shown.length - 1] += text;
  }
  return shown.filter((s) => s.endsWith('}')).map((s) => new RegExp(s.split('…').map(escape).join('[^{}]*?')));
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The rows of the markdown table that follows `heading` (first column, backticks removed). */
export function tableColumn(markdown: string, heading: string): string[] {
  const lines = markdown.split('\n');
  const at = lines.findIndex((l) => l.startsWith(heading));
  if (at === -1) throw new Error(`no "${heading}" in the README`);
  const rows: string[] = [];
  let inTable = false;
  for (const l of lines.slice(at + 1)) {
    if (l.startsWith('|')) {
      inTable = true;
      const first = l.split('|')[1]!.trim();
      if (first !== 'flag' && !/^-+$/.test(first)) rows.push(first.replace(/`/g, ''));
    } else if (inTable) break;
  }
  return rows;
}
