import type { ProviderContext } from '../task-provider.js';
import { statusError, type ProviderResponse } from '../task-http.js';

/**
 * ByteDance ModelArk (BytePlus: https://ark.ap-southeast.bytepluses.com/api/v3; Volcano Engine:
 * https://ark.cn-beijing.volces.com/api/v3): bearer API key, errors as
 * {error: {code, message, type}} with codes such as InputTextSensitiveContentDetected.
 */
export const arkAuth = (ctx: Pick<ProviderContext, 'credential'>): Record<string, string> =>
  ctx.credential ? { authorization: `Bearer ${ctx.credential}` } : {};

export function arkError(r: ProviderResponse): Error {
  const e = (r.json as { error?: { code?: string; message?: string } } | undefined)?.error;
  return statusError(r, e?.message, e?.code);
}

/** Whether an Ark error code is a safety refusal (input or output). */
export const SENSITIVE = /Sensitive|Risk/i;

/** The ratio nearest to `ratio` of those offered (by the logarithm of the ratio). */
export function nearest(ratio: string, offered: readonly string[]): string {
  const value = (r: string) => {
    const [w, h] = r.split(':').map(Number) as [number, number];
    return Math.log(w / h);
  };
  const want = value(ratio);
  return offered.reduce((best, r) => (Math.abs(value(r) - want) < Math.abs(value(best) - want) ? r : best), offered[0]!);
}
