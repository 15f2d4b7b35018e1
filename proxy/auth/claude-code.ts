import type { IncomingHttpHeaders } from 'node:http';

/**
 * Is this request from Claude Code? A pure function over several independent signals, so that
 * one signal changing in a new release does not lock users out (REFERENCE.md lists them).
 *
 * Headers: `user-agent: claude-cli/<ver> (...)` (2), `x-app: cli` (1), an anthropic-beta list
 * with `claude-code-<date>` (2), `x-claude-code-session-id` (1).
 * Body: a system block starting `x-anthropic-billing-header:` (2), the identity block "You are
 * Claude Code, ..." / "You are a Claude agent, built on Anthropic's Claude Agent SDK" (2),
 * `metadata.user_id` in Claude Code's shape (1): a JSON string with device_id / account_uuid /
 * session_id (2.1.x) or `user_<hex>_account_<uuid>_session_<uuid>` (up to 2.0.x).
 *
 * Rule: at least 2 points from headers (the official SDKs send none: body signals alone are
 * easy to paste into any prompt) and at least 4 in all. A full model call scores 11; dropping
 * any single signal still passes; probe calls (count_tokens, max_tokens: 1) pass on headers.
 * Bump DETECTOR_VERSION when weights or the rule change; the fixtures under
 * test/fixtures/claude-code/ pin the behaviour per client release.
 */
export const DETECTOR_VERSION = '2';

export interface Verdict {
  claudeCode: boolean;
  headerScore: number;
  bodyScore: number;
  signals: string[];
  /** Why it was refused, for the 403 message (names signals only; never echoes values). */
  reason: string;
}

const IDENTITY = [/^\s*You are Claude Code, Anthropic's official CLI for Claude/, /^\s*You are a Claude agent, built on Anthropic's Claude Agent SDK/];
const LEGACY_USER_ID = /^user_[0-9a-f]{16,}_account_[0-9a-f-]*_session_[0-9a-f-]{8,}$/;

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

export function isClaudeCodeUserId(v: unknown): boolean {
  if (typeof v !== 'string') return false;
  if (LEGACY_USER_ID.test(v)) return true;
  if (!v.startsWith('{')) return false;
  try {
    const o = JSON.parse(v) as Record<string, unknown>;
    return typeof o === 'object' && o !== null && typeof o.session_id === 'string' && (typeof o.device_id === 'string' || typeof o.account_uuid === 'string');
  } catch {
    return false;
  }
}

export function detectClaudeCode(headers: IncomingHttpHeaders, body: Record<string, unknown>): Verdict {
  const signals: string[] = [];
  let headerScore = 0;
  let bodyScore = 0;
  const hit = (name: string, points: number, inHeaders: boolean) => {
    signals.push(name);
    if (inHeaders) headerScore += points;
    else bodyScore += points;
  };
  if (/^claude-cli\/\d/.test(header(headers, 'user-agent'))) hit('user-agent', 2, true);
  if (header(headers, 'x-app') === 'cli') hit('x-app', 1, true);
  if (/(^|,)\s*claude-code-\d+/.test(header(headers, 'anthropic-beta'))) hit('anthropic-beta', 2, true);
  if (header(headers, 'x-claude-code-session-id')) hit('session-id', 1, true);
  const texts = systemTexts(body);
  if (texts.some((t) => t.startsWith('x-anthropic-billing-header:'))) hit('billing-header', 2, false);
  if (texts.some((t) => IDENTITY.some((re) => re.test(t)))) hit('identity', 2, false);
  if (isClaudeCodeUserId((body.metadata as { user_id?: unknown } | undefined)?.user_id)) hit('metadata.user_id', 1, false);
  const claudeCode = headerScore >= 2 && headerScore + bodyScore >= 4;
  return {
    claudeCode,
    headerScore,
    bodyScore,
    signals,
    reason: claudeCode ? 'Claude Code' : `the request does not look like Claude Code (signals seen: ${signals.join(', ') || 'none'})`,
  };
}
