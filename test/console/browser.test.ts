import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MICRO } from '../../api/snapshot/money.js';
import { credit } from '../../proxy/billing/index.js';
import { FolderConfigSource } from '../../proxy/config/folder-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/front/features.js';
import { startGateway, type Gateway } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';

/** What the test reads of an <img> in the page (the suite is typed without the DOM library). */
type LoadedImage = { complete: boolean; naturalWidth: number };

/**
 * Both consoles in Debian's Chromium (installed by .ci/run) against a gateway serving a copy of
 * the quickstart's manifests, with the simulator as every upstream. CONSOLE_SCREENSHOTS=DIR
 * writes the README's screenshots there (docs/console).
 */
const CHROMIUM = '/usr/bin/chromium';
const KEY = 'sk-service-quickstart';
const CC_KEY = 'sk-service-quickstart-cc';
const ADMIN = 'console-admin';
const shots = process.env.CONSOLE_SCREENSHOTS;

let dir: string;
let sim: Simulator;
let gw: Gateway;
let source: FolderConfigSource;
let browser: Browser;

beforeAll(async () => {
  sim = await startSimulator();
  dir = await mkdtemp(join(tmpdir(), 'tollgate-console-'));
  await cp('examples/quickstart', dir, { recursive: true });
  for (const f of await readdir(dir)) {
    const p = join(dir, f);
    await writeFile(p, (await readFile(p, 'utf8')).replaceAll('http://127.0.0.1:8090', sim.url));
  }
  await mkdir(join(dir, 'keys'));
  source = new FolderConfigSource(dir, createLogger({}, 'silent'), { debounceMs: 30 });
  gw = await startGateway({
    source,
    port: 0,
    adminPort: 0,
    adminToken: ADMIN,
    log: createLogger({}, 'silent'),
    billing: defaultBilling,
    features: defaultFeatures,
    options: { allowLoopbackURLs: true, workerIntervalMs: 50, keyManifests: { dirs: [dir], writeDir: join(dir, 'keys') } },
  });
  await gw.deps.store.tx((q) => credit(q, { account: 'demo', operationId: 'console-test-grant', amount: 1000n * MICRO }));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 10_000): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function newPage(): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (err) => {
    throw err;
  });
  return page;
}

async function signIn(page: Page, url: string, field: string, secret: string) {
  await page.goto(url);
  await page.getByRole('textbox', { name: field }).fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForSelector('body[data-ready="true"]');
}

const snap = async (page: Page, name: string) => {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
};

const cellText = (page: Page, table: string, row: string) => page.locator(`#${table} tr`, { hasText: row }).first().innerText();

describe('the key holder console', () => {
  it('signs in with a key kept in session storage and shows the prices of the manifests, live', async () => {
    const page = await newPage();
    await signIn(page, `${gw.url}/console/`, 'API key', KEY);
    expect(await page.evaluate('sessionStorage.getItem("tollgate.apiKey")')).toBe(KEY);
    expect(page.url()).toBe(`${gw.url}/console/`);
    // sim-gpt: inputPerMillion "0.50", cachedInputPerMillion "0.05", outputPerMillion "1.50"
    expect(await cellText(page, 'models-table', 'sim-gpt')).toMatch(/sim-gpt\s+chat\s+0\.5\s+0\.05\s+1\.5/);
    expect(await cellText(page, 'models-table', 'sim-image')).toContain('2K:high: 0.06 / image');
    const models = join(dir, 'models.yaml');
    await writeFile(models, (await readFile(models, 'utf8')).replace('outputPerMillion: "1.50"', 'outputPerMillion: "2.25"'));
    await until(
      async () => {
        await page.reload();
        await page.waitForSelector('body[data-ready="true"]');
        return cellText(page, 'models-table', 'sim-gpt');
      },
      (t) => /0\.05\s+2\.25/.test(t),
      'the new price on the page',
    );
    await page.close();
  });

  it('streams a playground answer through each endpoint; the balance and the usage chart move', async () => {
    const page = await newPage();
    await signIn(page, `${gw.url}/console/`, 'API key', KEY);
    const available = async () => Number(await page.locator('#bal-available').innerText());
    const before = await available();
    for (const endpoint of ['chat-completions', 'responses', 'messages']) {
      await page.locator('#play-model').selectOption(endpoint === 'messages' ? 'sim-claude' : 'sim-gpt');
      await page.locator('#play-endpoint').selectOption(endpoint);
      await page.getByRole('button', { name: 'Send (streams)' }).click();
      await page.waitForSelector('#play-status[data-done="true"]');
      expect((await page.locator('#play-output').innerText()).length, endpoint).toBeGreaterThan(0);
      await page.evaluate('delete document.getElementById("play-status").dataset.done');
    }
    await until(
      async () => {
        await page.getByRole('button', { name: 'Refresh' }).click();
        return page.locator('#usage-totals').innerText();
      },
      (t) => t.startsWith('Total: 3 requests'),
      'three requests in the chart',
    );
    expect(await available()).toBeLessThan(before);
    expect(Number(await page.locator('#usage-body figure').getAttribute('data-total'))).toBeGreaterThan(0);
    expect(await page.locator('#requests-body tbody tr').count()).toBe(3);
    await page.close();
  });

  it('shows an image task that succeeded, with its preview', async () => {
    const sub = await fetch(`${gw.url}/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-image', prompt: 'a lighthouse', size: '320x200' }),
    });
    const submitted = (await sub.json()) as { id: string };
    expect(sub.status, JSON.stringify(submitted)).toBe(200);
    const id = submitted.id;
    await until(
      async () =>
        ((await (await fetch(`${gw.url}/v1/images/generations/${id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { status: string }).status,
      (s) => s === 'succeeded' || s === 'failed',
      'the image task',
      20_000,
    );
    const page = await newPage();
    await signIn(page, `${gw.url}/console/`, 'API key', KEY);
    const row = page.locator('#tasks-body tr', { hasText: id });
    expect(await row.innerText()).toContain('succeeded');
    const img = row.locator('img');
    // The browser's own view of the result: the PNG loaded from the gateway, at the size asked.
    // Previews load lazily: bring it into view as a user scrolling down would.
    await img.scrollIntoViewIfNeeded();
    // Polled from the test (DevTools evaluation): waitForFunction compiles its predicate in the
    // page, which the console's Content-Security-Policy (no eval) rightly refuses.
    await expect
      .poll(() => img.evaluate((i) => (i as unknown as LoadedImage).complete && (i as unknown as LoadedImage).naturalWidth > 0), { timeout: 10_000 })
      .toBe(true);
    expect(await img.getAttribute('alt')).toContain(id);
    expect(await img.evaluate((i) => (i as unknown as LoadedImage).naturalWidth)).toBe(320);
    await snap(page, 'holder');
    await page.close();
  }, 40_000);

  it('gives a ccOnly key its catalog and balance but no playground (signed in with the keyboard only)', async () => {
    const page = await newPage();
    await page.goto(`${gw.url}/console/`);
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.id')).toBe('api-key');
    await page.keyboard.type(CC_KEY);
    await page.keyboard.press('Enter');
    await page.waitForSelector('body[data-ready="true"]');
    expect(await cellText(page, 'models-table', 'sim-claude')).toMatch(/1\.5\s+0\.15\s+7\.5/); // x0.5
    expect(await page.locator('#playground').isHidden()).toBe(true);
    expect(await page.locator('#bal-available').innerText()).toMatch(/^\d/);
    await page.close();
  });
});

describe('the operator console', () => {
  it('grants credits with an idempotency key and verifies the ledger', async () => {
    const page = await newPage();
    await signIn(page, `${gw.adminUrl}/console/`, 'Admin token', ADMIN);
    const balance = async () => Number((await cellText(page, 'accounts-table', 'demo')).split(/\s+/)[1]);
    const before = await balance();
    await page.locator('#grant-account').fill('demo');
    await page.locator('#grant-credits').fill('12.5');
    await page.getByRole('button', { name: 'Grant' }).click();
    await page.waitForSelector('#grant-result .ok');
    expect(await balance()).toBeCloseTo(before + 12.5, 6);
    await page.getByRole('button', { name: 'Verify the ledger' }).click();
    expect(await page.locator('#ledger-result').innerText()).toMatch(/^Consistent/);
    expect(await page.locator('#usage-totals').innerText()).toMatch(/\d+ requests/);
    await snap(page, 'operator');
    await page.close();
  });

  it('creates a key shown once, which works, and revokes it: the key then gets 401', async () => {
    const page = await newPage();
    page.on('dialog', (d) => void d.accept());
    await signIn(page, `${gw.adminUrl}/console/`, 'Admin token', ADMIN);
    await page.getByLabel('Name (optional)').fill('browser-made');
    await page.locator('#key-group').selectOption('default');
    await page.locator('#key-account').fill('demo');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.locator('#new-key').innerText();
    expect(key).toMatch(/^sk-service-/);
    const manifest = await readFile(join(dir, 'keys', 'browser-made.yaml'), 'utf8');
    expect(manifest).toContain('keyHash: sha256:');
    expect(manifest).not.toContain(key);
    const status = () => fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    await until(status, (s) => s === 200, 'the new key in service');
    await snap(page, 'operator-keys');
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    await page.getByRole('button', { name: 'Revoke key browser-made' }).click();
    await page.waitForSelector('#keys-new .ok');
    await until(status, (s) => s === 401, 'the revoked key refused');
    expect(await readFile(join(dir, 'keys', 'browser-made.yaml'), 'utf8')).toContain('revoked: true');
    await page.close();
    // The key holder's console refuses it too, and says why.
    const holder = await newPage();
    await holder.goto(`${gw.url}/console/`);
    await holder.getByRole('textbox', { name: 'API key' }).fill(key);
    await holder.getByRole('button', { name: 'Sign in' }).click();
    expect(await holder.getByRole('alert').innerText()).toMatch(/refused/);
    expect(await holder.evaluate('sessionStorage.getItem("tollgate.apiKey")')).toBeNull();
    await holder.close();
  });
});
