import { describe, expect, it } from 'vitest';
import { DETECTOR_VERSION, detectClaudeCode, isClaudeCodeUserId } from '../../proxy/auth/claude-code.js';
import { loadFixtures } from './fixtures.js';

const fixtures = loadFixtures();
const lower = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));

describe(`Claude Code detector v${DETECTOR_VERSION}`, () => {
  it('has fixtures of both kinds', () => {
    expect(fixtures.filter((f) => f.expect === 'claude-code').length).toBeGreaterThanOrEqual(4);
    expect(fixtures.filter((f) => f.expect === 'other').length).toBeGreaterThanOrEqual(2);
  });

  for (const f of fixtures) {
    it(`${f.name}: ${f.expect}`, () => {
      const v = detectClaudeCode(lower(f.headers), f.body);
      expect(v.claudeCode, `${f.description} — signals: ${v.signals.join(', ')}`).toBe(f.expect === 'claude-code');
    });
  }

  const full = fixtures.find((f) => f.name === 'claude-code-2.1-interactive')!;
  const headerSignals: [string, (h: Record<string, string>) => void][] = [
    ['user-agent', (h) => (h['user-agent'] = 'claude-code/3.0.0 (external, cli)')],
    ['x-app', (h) => delete h['x-app']],
    ['anthropic-beta', (h) => (h['anthropic-beta'] = 'interleaved-thinking-2025-05-14')],
    ['session-id', (h) => delete h['x-claude-code-session-id']],
  ];
  for (const [name, change] of headerSignals) {
    it(`a full model call still passes when a release changes ${name}`, () => {
      const h = lower(full.headers);
      change(h);
      const v = detectClaudeCode(h, full.body);
      expect(v.signals).not.toContain(name);
      expect(v.claudeCode).toBe(true);
    });
  }
  it('a full model call still passes without its system blocks or user_id', () => {
    const { system: _s, metadata: _m, ...body } = full.body;
    expect(detectClaudeCode(lower(full.headers), body).claudeCode).toBe(true);
  });

  it('body signals alone, or with only x-app, are refused and the reason names what was seen', () => {
    const v = detectClaudeCode({ 'x-app': 'cli' }, full.body);
    expect(v.claudeCode).toBe(false);
    expect(v.reason).toMatch(/x-app, billing-header, identity, metadata\.user_id/);
    expect(detectClaudeCode({}, {}).reason).toMatch(/signals seen: none/);
  });

  it('recognises both metadata.user_id shapes and nothing else', () => {
    expect(isClaudeCodeUserId('{"device_id":"ab","account_uuid":"","session_id":"5b0c"}')).toBe(true);
    expect(isClaudeCodeUserId('user_19f2f4ee153d47fb2ef3e7954239ff16_account_a929b7ef-d758_session_34832e57-9b65')).toBe(true);
    expect(isClaudeCodeUserId('alice')).toBe(false);
    expect(isClaudeCodeUserId('{"session_id":"x"}')).toBe(false);
    expect(isClaudeCodeUserId('{not json')).toBe(false);
    expect(isClaudeCodeUserId(42)).toBe(false);
  });
});
