import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { containerFetches, SIM_AWS_KEYS, SIM_CONTAINER_TOKEN } from '../../simulator/bedrock-converse.js';
import { metadataTokens, simServiceAccount, tokenExchanges } from '../../simulator/gemini-vertex.js';
import { providerStack, rid, route, withId, type ProviderStack } from './support.js';

/**
 * Backends with no credentials: Bedrock signs with keys from AWS's default chain, Vertex uses
 * Google's Application Default Credentials, both read from the environment the gateway captured
 * at start (here: each case's own, no instance metadata reached). Every source is offline: keys
 * in the environment, a shared credentials file or a service account file in a fresh HOME, the
 * container credentials endpoint and the metadata server served by the simulator on loopback.
 * The simulator checks each signature and token as AWS and Google would.
 */
let p: ProviderStack;
let sim: string;
let home: string;
const CLAUDE = 'claude-sonnet-4@20250514';
/** Keeps every case away from 169.254.169.254: only what the case gives is a source. */
const OFFLINE = { AWS_EC2_METADATA_DISABLED: 'true' };

beforeAll(async () => {
  p = await providerStack((s) => {
    sim = s;
    return [
      route('br-chain', { provider: 'bedrock', baseURL: s, region: 'us-east-1', model: 'anthropic.claude-sonnet-4-20250514-v1:0' }),
      route('vx-adc', { provider: 'vertex', baseURL: s, region: 'us-central1', model: 'gemini-2.5-pro' }),
      route('vx-adc-claude', { provider: 'vertex', baseURL: s, region: 'us-east5', model: CLAUDE }),
    ];
  }, {});
});
afterAll(async () => {
  await p?.close();
  if (home) await rm(home, { recursive: true, force: true });
  const logs = p.logs.join('\n');
  for (const secret of [SIM_AWS_KEYS.secretAccessKey, 'sim/temp/', 'sim-session-', SIM_CONTAINER_TOKEN, 'PRIVATE KEY', 'ya29.'])
    expect(logs).not.toContain(secret);
});

/** A fresh, empty HOME for one case. */
async function freshHome(): Promise<string> {
  if (home) await rm(home, { recursive: true, force: true });
  home = await mkdtemp(join(tmpdir(), 'tollgate-home-'));
  return home;
}

async function ask(model: string): Promise<{ id: string; text: string }> {
  const id = rid(model);
  const c = await p.openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }] }, withId(id));
  return { id, text: c.choices[0]!.message.content ?? '' };
}

describe("Bedrock without credentials: AWS's default chain", () => {
  it('keys in the environment sign the call (SigV4 the simulator verifies); a wrong secret is refused and named nowhere', async () => {
    p.useEnv({ ...OFFLINE, HOME: await freshHome(), AWS_ACCESS_KEY_ID: SIM_AWS_KEYS.accessKeyId, AWS_SECRET_ACCESS_KEY: SIM_AWS_KEYS.secretAccessKey });
    const { id, text } = await ask('br-chain');
    expect(text.length).toBeGreaterThan(0);
    const up = p.upstream(id);
    expect(up.path).toBe('/model/anthropic.claude-sonnet-4-20250514-v1%3A0/converse');
    expect(up.headers.authorization).toMatch(new RegExp(`^AWS4-HMAC-SHA256 Credential=${SIM_AWS_KEYS.accessKeyId}/\\d{8}/us-east-1/bedrock/aws4_request`));
    expect(up.headers['x-amz-security-token']).toBeUndefined();

    p.useEnv({ ...OFFLINE, HOME: await freshHome(), AWS_ACCESS_KEY_ID: SIM_AWS_KEYS.accessKeyId, AWS_SECRET_ACCESS_KEY: 'not-the-secret-0000' });
    const err = await p.openai.chat.completions.create({ model: 'br-chain', messages: [{ role: 'user', content: 'Hello' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 403 });
    expect(JSON.stringify(err)).not.toContain('not-the-secret');
    expect(p.logs.join('\n')).not.toContain('not-the-secret');
  });

  it('a shared credentials file in HOME, the profile AWS_PROFILE names', async () => {
    const h = await freshHome();
    await mkdir(join(h, '.aws'));
    await writeFile(
      join(h, '.aws', 'credentials'),
      `[default]\naws_access_key_id = AKIAOTHERKEY00000000\naws_secret_access_key = wrong/for/the/simulator\n\n[sim]\naws_access_key_id = ${SIM_AWS_KEYS.accessKeyId}\naws_secret_access_key = ${SIM_AWS_KEYS.secretAccessKey}\n`,
    );
    p.useEnv({ ...OFFLINE, HOME: h, AWS_PROFILE: 'sim' });
    const { id, text } = await ask('br-chain');
    expect(text.length).toBeGreaterThan(0);
    expect(p.upstream(id).headers.authorization).toContain(`Credential=${SIM_AWS_KEYS.accessKeyId}/`);
  });

  it('a profile of the shared config file with credential_process: the command it names gives the keys', async () => {
    const h = await freshHome();
    await mkdir(join(h, '.aws'));
    const script = join(h, 'keys.mjs');
    await writeFile(
      script,
      `console.log(JSON.stringify({ Version: 1, AccessKeyId: ${JSON.stringify(SIM_AWS_KEYS.accessKeyId)}, SecretAccessKey: ${JSON.stringify(SIM_AWS_KEYS.secretAccessKey)} }));\n`,
    );
    await writeFile(join(h, '.aws', 'config'), `[profile from-process]\ncredential_process = ${process.execPath} ${script}\n`);
    p.useEnv({ ...OFFLINE, HOME: h, AWS_PROFILE: 'from-process' });
    const { id, text } = await ask('br-chain');
    expect(text.length).toBeGreaterThan(0);
    expect(p.upstream(id).headers.authorization).toContain(`Credential=${SIM_AWS_KEYS.accessKeyId}/`);
  });

  it('the container credentials endpoint (ECS, EKS Pod Identity): temporary keys with their session token, fetched once and reused', async () => {
    p.useEnv({
      ...OFFLINE,
      HOME: await freshHome(),
      AWS_CONTAINER_CREDENTIALS_FULL_URI: `${sim}/aws/container-credentials`,
      AWS_CONTAINER_AUTHORIZATION_TOKEN: SIM_CONTAINER_TOKEN,
    });
    const before = containerFetches.get(p.stack.sim.context) ?? 0;
    const first = await ask('br-chain');
    const second = await ask('br-chain');
    expect(first.text.length).toBeGreaterThan(0);
    expect(second.text.length).toBeGreaterThan(0);
    const up = p.upstream(second.id);
    expect(up.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=ASIASIM/);
    expect(String(up.headers.authorization)).toContain('x-amz-security-token');
    expect(up.headers['x-amz-security-token']).toMatch(/^sim-session-/);
    expect((containerFetches.get(p.stack.sim.context) ?? 0) - before).toBe(1);
  });

  it('no source at all: the call fails as unavailable (502), the log names the sources tried', async () => {
    p.useEnv({ ...OFFLINE, HOME: await freshHome() });
    const err = await p.openai.chat.completions.create({ model: 'br-chain', messages: [{ role: 'user', content: 'Hello' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 502 });
    expect(p.logs.some((l) => l.includes('upstream auth failed') && l.includes('found no credentials') && l.includes('shared config files'))).toBe(true);
  });
});

describe("Vertex without credentials: Google's Application Default Credentials", () => {
  it('GOOGLE_APPLICATION_CREDENTIALS names a service account key file: its signed JWT is exchanged, its project_id names the project', async () => {
    const h = await freshHome();
    const file = join(h, 'sa.json');
    await writeFile(file, JSON.stringify(simServiceAccount(sim)));
    p.useEnv({ ...OFFLINE, HOME: h, GOOGLE_APPLICATION_CREDENTIALS: file });
    const before = tokenExchanges.get(p.stack.sim.context) ?? 0;
    const { id, text } = await ask('vx-adc');
    expect(text.length).toBeGreaterThan(0);
    const up = p.upstream(id);
    expect(up.path).toBe('/v1/projects/sim-project/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent');
    expect(up.headers.authorization).toMatch(/^Bearer ya29\.sim-/);
    expect((tokenExchanges.get(p.stack.sim.context) ?? 0) - before).toBe(1);
  });

  it("gcloud's application_default_credentials.json under HOME, when no variable names a file", async () => {
    const h = await freshHome();
    await mkdir(join(h, '.config', 'gcloud'), { recursive: true });
    await writeFile(join(h, '.config', 'gcloud', 'application_default_credentials.json'), JSON.stringify(simServiceAccount(sim)));
    p.useEnv({ ...OFFLINE, HOME: h, GCE_METADATA_HOST: '127.0.0.1:9' });
    const { id, text } = await ask('vx-adc');
    expect(text.length).toBeGreaterThan(0);
    expect(p.upstream(id).headers.authorization).toMatch(/^Bearer ya29\.sim-/);
  });

  it("the metadata server (GCE_METADATA_HOST): its service account's token, cached, and its project; Claude's count_tokens too", async () => {
    p.useEnv({ ...OFFLINE, HOME: await freshHome(), GCE_METADATA_HOST: new URL(sim).host });
    const before = metadataTokens.get(p.stack.sim.context) ?? 0;
    const first = await ask('vx-adc');
    const second = await ask('vx-adc-claude');
    expect(first.text.length).toBeGreaterThan(0);
    expect(second.text.length).toBeGreaterThan(0);
    expect(p.upstream(first.id).path).toBe('/v1/projects/sim-project/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent');
    expect(p.upstream(second.id).path).toBe(`/v1/projects/sim-project/locations/us-east5/publishers/anthropic/models/${encodeURIComponent(CLAUDE)}:rawPredict`);
    expect(p.upstream(second.id).headers.authorization).toMatch(/^Bearer ya29\.sim-metadata-/);

    const c = await p.anthropic.messages.countTokens({ model: 'vx-adc-claude', messages: [{ role: 'user', content: 'count me' }] }).withResponse();
    expect(c.response.headers.get('x-tollgate-token-count')).toBeNull();
    expect(c.data.input_tokens).toBeGreaterThan(0);
    expect(p.stack.sim.recorder.last()!.path).toBe('/v1/projects/sim-project/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict');
    expect((metadataTokens.get(p.stack.sim.context) ?? 0) - before).toBe(1);
  });

  it('nothing to find (no file, a metadata server that is not there): 502, no token or key in the answer', async () => {
    p.useEnv({ ...OFFLINE, HOME: await freshHome(), GCE_METADATA_HOST: '127.0.0.1:9' });
    const err = await p.openai.chat.completions.create({ model: 'vx-adc', messages: [{ role: 'user', content: 'Hello' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 502 });
    expect(p.logs.some((l) => l.includes('upstream auth failed') && l.includes('vertex'))).toBe(true);
  });
});

describe('what the gateway shows', () => {
  it('the metrics, the usage records and the logs hold none of the keys, tokens or session tokens the chains found', async () => {
    p.useEnv({ ...OFFLINE, HOME: await freshHome(), AWS_ACCESS_KEY_ID: SIM_AWS_KEYS.accessKeyId, AWS_SECRET_ACCESS_KEY: SIM_AWS_KEYS.secretAccessKey });
    const { id } = await ask('br-chain');
    await p.record(id);
    const metrics = await (await fetch(`${p.stack.gw.adminUrl}/metrics`, { headers: { authorization: 'Bearer test-admin' } })).text();
    expect(metrics).toContain('tollgate_');
    const usage = JSON.stringify((await p.stack.gw.deps.store.query('SELECT * FROM usage_records')).rows);
    expect(usage).toContain('br-chain');
    for (const shown of [metrics, usage, p.logs.join('\n')]) {
      for (const secret of [SIM_AWS_KEYS.secretAccessKey, 'sim/temp/', 'sim-session-', SIM_CONTAINER_TOKEN, 'PRIVATE KEY', 'ya29.'])
        expect(shown).not.toContain(secret);
    }
  });
});
