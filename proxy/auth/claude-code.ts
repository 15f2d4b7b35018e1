import type { IncomingHttpHeaders } from 'node:http';

/**
 * Is this request from Claude Code? A pure function over several independent signals, so that
 * one signal changing in a new release does not lock users out (REFERENCE.md lists them):
 * headers (user agent, x-app, anthropic-beta, session id) and body (the billing-header and
 * identity system blocks, the metadata.user_id shape). A request passes with enough evidence
 * from both headers and body, or very strong evidence from either.
 */
export const DETECTOR_VERSION = '1';

export interface Verdict {
  claudeCode: boolean;
  score: number;
  signals: string[];
  /** Why it was refused, for the 403 message (never echoes secrets). */
  reason: string;
}

const IDENTITY = [/^You are Claude Code, Anthropic's official CLI for Claude/, /^You are a Claude agent, built on Anthropic's Claude Agent SDK/];

function header(h: IncomingHttpHeaders, name: string): string {
  const v = h[name];
  return Array.isArray(v) ? v.join(', ') : (v ?? '');
}

function systemTexts(body: Record<string, unknown>): string[] {
  const s = body.system;
  if (typeof s === 'string') return [s];
  if (!Array.isArray(s)) return [];
  return s.flatMap((b) => (b && typeof b === 'object' && typeof (b as { text?: unknown }).text === 'string' ? [(b as { text: string }).text] : []));
}

export function detectClaudeCode(headers: IncomingHttpHeaders, body: Record<string, unknown>): Verdict {
  const signals: string[] = [];
  let headerScore = 0;
  let bodyScore = 0;
  if (/^claude-cli\/\d/.test(header(headers, 'user-agent'))) {
    headerScore += 2;
    signals.push('user-agent');
  }
  if (header(headers, 'x-app') === 'cli') {
    headerScore += 1;
    signals.push('x-app');
  }
  if (/(^|,)\s*claude-code-\d+/.test(header(headers, 'anthropic-beta'))) {
    headerScore += 2;
    signals.push('anthropic-beta');
  }
  if (header(headers, 'x-claude-code-session-id')) {
    headerScore += 1;
    signals.push('session-id');
  }
  const texts = systemTexts(body);
  if (texts.some((t) => t.startsWith('x-anthropic-billing-header:'))) {
    bodyScore += 2;
    signals.push('billing-header');
  }
  if (texts.some((t) => IDENTITY.some((re) => re.test(t)))) {
    bodyScore += 2;
    signals.push('identity');
  }
  const meta = body.metadata as { user_id?: unknown } | undefined;
  if (typeof meta?.user_id === 'string' && /session/.test(meta.user_id)) {
    bodyScore += 1;
    signals.push('metadata.user_id');
  }
  const score = headerScore + bodyScore;
  // Probe calls (count_tokens, max_tokens: 1) carry headers but no system prompt.
  const claudeCode = (headerScore >= 3 && bodyScore >= 1) || headerScore >= 4 || (headerScore >= 2 && bodyScore >= 2);
  return { claudeCode, score, signals, reason: claudeCode ? 'Claude Code' : `the request does not look like Claude Code (signals: ${signals.join(', ') || 'none'})` };
}
