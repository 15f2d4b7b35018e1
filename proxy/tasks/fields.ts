import { badRequest } from '../../kernel/errors.js';
import { checkUrlSyntax, type UrlPolicy } from '../net/url-guard.js';

/**
 * Request-field rules every task kind shares (pure): aliases, media URLs and the webhook pair.
 * Each throws a 400 naming the field the client wrote.
 */

export const MAX_URL = 4096;
export const MAX_WEBHOOK_SECRET = 512;

export interface Picked {
  /** The name the client used (the field or one of its aliases). */
  name: string;
  value: unknown;
}

/** A field and its aliases: absent, or one value (aliases that disagree are a 400 naming the later one). */
export function pick(body: Record<string, unknown>, names: readonly string[]): Picked | undefined {
  let found: Picked | undefined;
  for (const name of names) {
    const value = body[name];
    if (value === undefined || value === null) continue;
    if (found && JSON.stringify(found.value) !== JSON.stringify(value)) {
      throw badRequest(`${found.name} and ${name} are the same field and disagree; give one of them`, name);
    }
    found ??= { name, value };
  }
  return found;
}

/** An http(s) URL the policy does not refuse outright (names are checked again after DNS when fetched). */
export function mediaUrl(value: unknown, field: string, policy: UrlPolicy): string {
  if (typeof value !== 'string' || value === '') throw badRequest(`${field} must be an http or https URL`, field);
  if (value.length > MAX_URL) throw badRequest(`${field} is longer than ${MAX_URL} characters`, field);
  const why = checkUrlSyntax(value, policy);
  if (why) throw badRequest(`${field} ${why}`, field);
  return value;
}

/** webhook_url and webhook_secret: both or neither. */
export function parseWebhook(body: Record<string, unknown>, policy: UrlPolicy): { url: string; secret: string } | undefined {
  const hookUrl = body.webhook_url;
  const secret = body.webhook_secret;
  if (hookUrl !== undefined && hookUrl !== null) {
    const url = mediaUrl(hookUrl, 'webhook_url', policy);
    if (secret === undefined || secret === null || secret === '')
      throw badRequest('webhook_secret is required once webhook_url is set: deliveries are signed with it', 'webhook_secret');
    if (typeof secret !== 'string' || secret.length > MAX_WEBHOOK_SECRET)
      throw badRequest(`webhook_secret must be a string of at most ${MAX_WEBHOOK_SECRET} characters`, 'webhook_secret');
    return { url, secret };
  }
  if (secret !== undefined && secret !== null) throw badRequest('webhook_secret is set but webhook_url is not', 'webhook_url');
  return undefined;
}
