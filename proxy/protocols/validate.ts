import type { z } from 'zod';
import { GatewayError } from '../../kernel/errors.js';

/** zod parse -> a 400 that names the first offending field. */
export function parseWire<T>(schema: z.ZodType<T>, body: unknown, what: string): T {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const path = issue.path.map(String).join('.');
  const message = path ? `${what}: ${path}: ${issue.message}` : `${what}: ${issue.message}`;
  throw new GatewayError('invalid_request', message, path ? { param: path } : {});
}
