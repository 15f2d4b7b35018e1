import { badRequest, GatewayError } from '../../kernel/errors.js';
import { findUnstorable } from '../../kernel/storable.js';
import type { RequestContext } from './context.js';

/** Default 32 MiB: coding agents send 100 KB+ bodies routinely, images as data URLs more. */
export const DEFAULT_BODY_LIMIT = 32 * 1024 * 1024;

/** Reads the whole body up to the limit: 413 past it, without buffering the excess. */
export async function readBody(ctx: RequestContext): Promise<Buffer> {
  const { bodyLimit } = ctx;
  const declared = Number(ctx.req.headers['content-length'] ?? -1);
  if (declared > bodyLimit) throw new GatewayError('body_too_large', `request body exceeds the limit of ${bodyLimit} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > bodyLimit) {
      ctx.req.resume();
      throw new GatewayError('body_too_large', `request body exceeds the limit of ${bodyLimit} bytes`);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

export interface JsonBody {
  raw: Buffer;
  json: Record<string, unknown>;
}

/**
 * application/json object bodies: 415 for another content type, 400 for invalid JSON or a
 * non-object. `storable`: the body reaches the store (tasks, admin), so a string or key the store
 * cannot hold (NUL, an unpaired surrogate) is a 400 naming it.
 */
export async function readJson(ctx: RequestContext, opts: { storable?: boolean } = {}): Promise<JsonBody> {
  const type = ctx.req.headers['content-type'];
  if (type !== undefined && !/^application\/(.+\+)?json\b/i.test(type)) {
    throw new GatewayError('unsupported_media_type', `Content-Type must be application/json, got "${type.slice(0, 100)}"`);
  }
  const raw = await readBody(ctx);
  if (raw.length === 0) throw new GatewayError('invalid_json', 'request body is empty; a JSON object is required');
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new GatewayError('invalid_json', `request body is not valid JSON: ${(err as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new GatewayError('invalid_json', 'request body must be a JSON object');
  }
  if (opts.storable) {
    const bad = findUnstorable(json);
    if (bad) throw badRequest(`${bad} contains a character that cannot be stored (NUL or an unpaired UTF-16 surrogate)`, bad);
  }
  return { raw, json: json as Record<string, unknown> };
}
