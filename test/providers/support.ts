import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { expect } from 'vitest';
import type { Logger } from '../../kernel/log.js';
import { readSettings } from '../../kernel/settings.js';
import { usageOf } from '../billing/support.js';
import { apiKey, group } from '../support/resources.js';
import { startStack, type Stack } from '../support/stack.js';

/**
 * A gateway (real ledger, PGlite in memory) in front of the simulator with provider routes, the
 * official SDKs pointed at it, and every log line kept, so a test can show a credential never
 * appears in one. Prices: 3 micro-credits an input token, 1 a cached one, 5 an output token.
 */
export const KEY = 'sk-service-providers-test';
export const PRICING = { inputPerMillion: '3', cachedInputPerMillion: '1', outputPerMillion: '5' };

export interface ProviderStack {
  stack: Stack;
  openai: OpenAI;
  anthropic: Anthropic;
  logs: string[];
  /** The usage record of a request id, once durable. */
  record(id: string): Promise<Record<string, unknown>>;
  /** Replaces the environment the gateway captured at start (credentials and default chains read it). */
  useEnv(env: Record<string, string>): void;
  /** The upstream request the simulator received for a request id. */
  upstream(id: string): { path: string; query: string; headers: Record<string, unknown>; body: Record<string, unknown> };
  close(): Promise<void>;
}

function capture(lines: string[], base: Record<string, unknown> = {}): Logger {
  const write = (level: string) => (msg: string, fields?: Record<string, unknown>) => lines.push(JSON.stringify({ level, msg, ...base, ...fields }));
  return { info: write('info'), warn: write('warn'), error: write('error'), child: (f) => capture(lines, { ...base, ...f }) };
}

export function route(name: string, backend: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'tollgate.dev/v1alpha1',
    kind: 'ModelRoute',
    metadata: { name },
    spec: { type: 'chat', backends: [backend], pricing: PRICING, ...extra },
  };
}

/** `env`: the environment credentials are read from (a function when they name the simulator's URL). */
export async function providerStack(
  routes: (sim: string) => object[],
  env: Record<string, string> | ((sim: string) => Record<string, string>),
): Promise<ProviderStack> {
  const logs: string[] = [];
  const settings = readSettings({});
  const stack = await startStack(
    (sim) => {
      Object.assign(settings, { secretFromEnv: readSettings(typeof env === 'function' ? env(sim) : env).secretFromEnv });
      const rs = routes(sim);
      return [
        ...rs,
        group(
          'g',
          rs.map((r) => (r as { metadata: { name: string } }).metadata.name),
        ),
        apiKey('k', KEY, 'g'),
      ];
    },
    { settings, log: capture(logs) },
  );
  return {
    stack,
    logs,
    openai: new OpenAI({ baseURL: `${stack.gw.url}/v1`, apiKey: KEY, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: stack.gw.url, apiKey: null, authToken: KEY, maxRetries: 0 }),
    record: (id) => usageOf(stack.gw.deps.store, id),
    useEnv: (env) => Object.assign(settings, { secretFromEnv: readSettings(env).secretFromEnv }),
    upstream(id) {
      const rec = stack.sim.recorder.all().filter((r) => r.headers['x-request-id'] === id);
      expect(rec).toHaveLength(1);
      const r = rec[0]!;
      return { path: r.path, query: r.query, headers: r.headers, body: JSON.parse(r.body.toString()) as Record<string, unknown> };
    },
    close: () => stack.close(),
  };
}

/** The charge of a usage record at PRICING, from its own token counts. */
export function priceOf(rec: Record<string, unknown>): bigint {
  const input = BigInt(rec.input_tokens as string);
  const cached = BigInt(rec.cached_input_tokens as string);
  const output = BigInt(rec.output_tokens as string);
  return (input - cached) * 3n + cached + output * 5n;
}

export const withId = (id: string) => ({ headers: { 'x-request-id': id } });

let n = 0;
export const rid = (tag: string) => `${tag}-${process.pid}-${Date.now().toString(36)}-${++n}`;
