import { header } from './headers.js';

/**
 * How long an upstream asks to be left alone, in ms, read as the official OpenAI SDKs read it:
 * `retry-after-ms` first (OpenAI's and Azure's, to the millisecond), then `retry-after` as
 * delay-seconds or as an HTTP-date (RFC 9110, section 10.2.3). Undefined when neither says
 * anything readable, or the date is already past. `now` is wall time: an HTTP-date is the
 * upstream's clock, compared with ours.
 */
export function retryAfterMs(headers: Record<string, string | string[] | undefined>, now = Date.now()): number | undefined {
  const ms = Number(header(headers['retry-after-ms']));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const v = header(headers['retry-after'])?.trim();
  if (!v) return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) {
    const s = Number(v);
    return s > 0 ? s * 1000 : undefined;
  }
  const at = Date.parse(v);
  return Number.isFinite(at) && at > now ? at - now : undefined;
}
