import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** A recorded client request (test/fixtures/claude-code/*.json); Authorization is never stored. */
export interface ClientFixture {
  name: string;
  description: string;
  source: string;
  /** What the ccOnly gate must decide. */
  expect: 'claude-code' | 'other';
  method: 'POST';
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

const DIR = fileURLToPath(new URL('../fixtures/claude-code/', import.meta.url));

export function loadFixtures(): ClientFixture[] {
  return readdirSync(DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f.replace(/\.json$/, ''), ...(JSON.parse(readFileSync(DIR + f, 'utf8')) as Omit<ClientFixture, 'name'>) }));
}
