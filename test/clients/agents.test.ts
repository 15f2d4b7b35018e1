import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey, chatRoute, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';
import { RecordingBilling } from '../chat/support.js';
import { frontCounts, type FrontCounts } from '../support/prom.js';

/**
 * The real agents, across protocols: Claude Code (Messages) on models whose backends speak only
 * Chat Completions or only Responses, Codex CLI (Responses) on a Messages model and a Chat
 * Completions one. Each runs offline with a fresh HOME, makes the simulator's model call its
 * shell tool (`[sim:tool]`: the command is the prompt's own words), runs it for real, sends the
 * result back and gets the final answer: a whole tool loop through translation.
 */
const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../node_modules/.bin/', import.meta.url));
const KEY = 'sk-service-agents-test';
const billing = new RecordingBilling();
let stack: Stack;
let root: string;

beforeAll(async () => {
  stack = await startStack(
    (sim) => [
      chatRoute('gpt-chat', `${sim}/v1`, { backend: { provider: 'openai-compatible', model: 'gpt-sim' } }),
      chatRoute('gpt-responses', `${sim}/v1`, { backend: { provider: 'openai-compatible', model: 'gpt-sim', paths: { responses: '/responses' } } }),
      chatRoute('claude-messages', sim, { backend: { provider: 'anthropic', model: 'claude-sim' } }),
      group('g', ['gpt-chat', 'gpt-responses', 'claude-messages']),
      apiKey('k', KEY, 'g'),
    ],
    { billing: billing.factory },
  );
  root = mkdtempSync(join(tmpdir(), 'tollgate-agents-'));
});
afterAll(async () => {
  await stack.close();
  rmSync(root, { recursive: true, force: true });
});

/** A fresh HOME and working folder for one run. */
function sandbox(name: string): { home: string; work: string } {
  const home = join(root, name, 'home');
  const work = join(root, name, 'work');
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  return { home, work };
}

const baseEnv = (home: string) => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', NO_COLOR: '1' });

/**
 * On the lean front (the default), every model call a CLI made was read by it: nothing went to
 * node:http but requests other than POST (Claude Code's `HEAD /` warm-up, Codex's WebSocket
 * attempt), each on a connection of its own. A header a new CLI version sends that falls outside
 * the front's subset would put every call of that client on node:http's slower path.
 */
async function expectLean(before: FrontCounts): Promise<void> {
  if (process.env.TOLLGATE_TEST_HTTP_FRONT === 'node') return;
  const after = await frontCounts(stack.gw.adminUrl);
  expect(after.connections).toBeGreaterThan(before.connections);
  expect({ route: after.route - before.route, head: after.head - before.head }).toEqual({ route: 0, head: 0 });
}

/** Upstream requests the simulator recorded since `from`, on one path. */
const upstream = (from: number, path: string) =>
  stack.sim.recorder
    .all()
    .slice(from)
    .filter((r) => r.path === path)
    .map((r) => JSON.parse(r.body.toString()) as Record<string, unknown>);

async function claude(name: string, model: string, prompt: string, extra: string[] = []) {
  const { home, work } = sandbox(name);
  const env = {
    ...baseEnv(home),
    ANTHROPIC_BASE_URL: stack.gw.url,
    ANTHROPIC_AUTH_TOKEN: KEY,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
  };
  const front = await frontCounts(stack.gw.adminUrl);
  const { stdout } = await run(join(BIN, 'claude'), ['-p', prompt, '--model', model, '--output-format', 'json', ...extra], {
    cwd: work,
    env,
    timeout: 90_000,
  });
  await expectLean(front);
  return { work, result: JSON.parse(stdout) as { subtype: string; is_error: boolean; num_turns: number; result: string } };
}

async function codex(name: string, model: string, prompt: string, builtin = false) {
  const { home, work } = sandbox(name);
  const codexHome = join(home, '.codex');
  mkdirSync(codexHome, { recursive: true });
  // A custom provider speaks Responses over HTTP; the built-in one tries a WebSocket first.
  writeFileSync(
    join(codexHome, 'config.toml'),
    builtin
      ? `model = "${model}"\nopenai_base_url = "${stack.gw.url}/v1"\n`
      : `model = "${model}"\nmodel_provider = "tollgate"\n[model_providers.tollgate]\nname = "Tollgate"\nbase_url = "${stack.gw.url}/v1"\nenv_key = "TOLLGATE_KEY"\nwire_api = "responses"\n`,
  );
  const env = { ...baseEnv(home), CODEX_HOME: codexHome, TOLLGATE_KEY: KEY, RUST_LOG: 'error' };
  if (builtin) {
    await new Promise<void>((resolve, reject) => {
      const p = execFile(join(BIN, 'codex'), ['login', '--with-api-key'], { env, timeout: 30_000 }, (err) => (err ? reject(err) : resolve()));
      p.stdin!.end(KEY);
    });
  }
  const front = await frontCounts(stack.gw.adminUrl);
  const exec = run(join(BIN, 'codex'), ['exec', '--skip-git-repo-check', '--json', '-s', 'workspace-write', prompt], { cwd: work, env, timeout: 90_000 });
  // codex exec reads more of the prompt from stdin until it closes.
  exec.child.stdin!.end();
  const { stdout, stderr } = await exec;
  await expectLean(front);
  const events = stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { type: string; item?: { type: string; command?: string; exit_code?: number; text?: string } });
  return { work, events, stderr, stdout };
}

describe('Claude Code (Messages) on models served through another protocol', { timeout: 120_000 }, () => {
  it('its real first request (the default tools) reaches a Chat-Completions-only model and is answered', async () => {
    const from = stack.sim.recorder.all().length;
    const { result } = await claude('cc-hello', 'gpt-chat', 'Say hello');
    expect(result).toMatchObject({ subtype: 'success', is_error: false });
    expect(result.result.length).toBeGreaterThan(0);
    const [up] = upstream(from, '/v1/chat/completions').filter((b) => Array.isArray(b.tools));
    // All of Claude Code's tools, as functions; its system prompt as system messages.
    expect((up!.tools as unknown[]).length).toBeGreaterThan(15);
    expect((up!.messages as { role: string }[])[0]!.role).toBe('system');
    expect(JSON.stringify(up)).not.toContain('cache_control');
  });

  it.each(['gpt-chat', 'gpt-responses'])(
    'a tool loop on %s: Bash runs the command the model asked for, the result goes back, the answer ends the turn',
    async (model) => {
      const { work, result } = await claude(`cc-tool-${model}`, model, `touch made-by-claude-code [sim:tool]`, ['--tools', 'Bash', '--allowedTools', 'Bash']);
      expect(result).toMatchObject({ subtype: 'success', is_error: false, num_turns: 2 });
      expect(existsSync(join(work, 'made-by-claude-code'))).toBe(true);
    },
  );
});

describe('Codex CLI (Responses) on models served through another protocol', { timeout: 120_000 }, () => {
  it.each(['claude-messages', 'gpt-chat'])('a tool loop on %s: exec_command runs, its output goes back, the agent answers', async (model) => {
    const from = stack.sim.recorder.all().length;
    const { work, events } = await codex(`codex-tool-${model}`, model, 'touch made-by-codex [sim:tool]');
    const command = events.find((e) => e.type === 'item.completed' && e.item?.type === 'command_execution');
    expect(command?.item).toMatchObject({ exit_code: 0 });
    expect(command!.item!.command).toContain('touch made-by-codex');
    expect(existsSync(join(work, 'made-by-codex'))).toBe(true);
    expect(events.some((e) => e.item?.type === 'agent_message' && (e.item.text ?? '').length > 0)).toBe(true);
    expect(events.at(-1)?.type).toBe('turn.completed');
    if (model === 'claude-messages') {
      // The second request carried the call and its output as tool_use / tool_result; web_search, hosted by OpenAI, was not offered.
      const bodies = upstream(from, '/v1/messages');
      const last = bodies.at(-1)! as { messages: { content: { type: string; id?: string; tool_use_id?: string }[] | string }[]; tools: { name: string }[] };
      const blocks = last.messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content));
      expect(blocks.find((b) => b.type === 'tool_result')?.tool_use_id).toBe(blocks.find((b) => b.type === 'tool_use')?.id);
      expect(last.tools.map((t) => t.name)).toContain('exec_command');
      expect(last.tools.map((t) => t.name)).not.toContain('web_search');
    }
  });

  it("the built-in OpenAI provider's WebSocket attempt is answered 426, so it falls back to POST at once (no reconnect rounds)", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const u = new URL(`${stack.gw.url}/v1/responses`);
      const req = request({
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('upgrade', () => resolve(101));
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(426);
    const { events, stderr, stdout } = await codex('codex-builtin', 'gpt-chat', 'Say hi', true);
    expect(`${stdout}${stderr}`).not.toMatch(/Reconnecting/);
    expect(events.at(-1)?.type).toBe('turn.completed');
  });
});
