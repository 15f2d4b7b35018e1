import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { EventStreamCodec } from '@smithy/eventstream-codec';
import { SignatureV4 } from '@smithy/signature-v4';
import { planAnswer, type ToolSpec } from './chat-plan.js';
import { parseDirectives, sleep } from './directives.js';
import type { SimRequest, SimRoute } from './server.js';
import { sendJson } from './sim-stream.js';
import { countInputTokens, simId } from './text.js';

/**
 * Amazon Bedrock's runtime as bedrock-runtime.REGION.amazonaws.com answers it:
 *   POST /model/{modelId}/converse          JSON
 *   POST /model/{modelId}/converse-stream   application/vnd.amazon.eventstream (binary, by the official codec)
 * Every request is authenticated: SigV4 (checked against SIM_AWS_KEYS, or temporary keys with their
 * session token from GET /aws/container-credentials, by signing the received request again; a wrong signature is Bedrock's 403 InvalidSignatureException, an unknown key
 * its UnrecognizedClientException) or a Bedrock API key (Bearer ABSK...). Reasoning blocks with
 * a signature when Claude's thinking is asked in additionalModelRequestFields; directives as
 * elsewhere (`[sim:429]` ThrottlingException, `[sim:fail]` an in-stream exception).
 */
export const SIM_AWS_KEYS = { accessKeyId: 'AKIASIMULATOR0000001', secretAccessKey: 'simulator/bedrock/secret/0123456789abcd' };
export const SIM_BEDROCK_API_KEY = 'ABSKc2ltdWxhdG9yLWJlZHJvY2stYXBpLWtleQ==';
/** What the container credentials endpoint wants in Authorization (as EKS Pod Identity's agent does). */
export const SIM_CONTAINER_TOKEN = 'sim-container-authorization-token';

interface TempKeys {
  secretAccessKey: string;
  sessionToken: string;
  until: number;
}
/** Temporary keys the container endpoint issued, per simulator: they sign like SIM_AWS_KEYS, with their session token. */
const issuedKeys = new WeakMap<object, Map<string, TempKeys>>();
function tempKeys(r: SimRequest): Map<string, TempKeys> {
  let m = issuedKeys.get(r.sim);
  if (!m) issuedKeys.set(r.sim, (m = new Map<string, TempKeys>()));
  return m;
}
/** Container credentials served, for tests that show keys are cached. */
export const containerFetches = new WeakMap<object, number>();

/**
 * GET /aws/container-credentials: the endpoint AWS_CONTAINER_CREDENTIALS_FULL_URI names on ECS and
 * EKS (Pod Identity): temporary keys for one hour, when Authorization carries SIM_CONTAINER_TOKEN.
 */
function containerCredentials(r: SimRequest): void {
  if (r.req.headers.authorization !== SIM_CONTAINER_TOKEN) {
    return sendJson(r, 401, { message: 'the container credentials endpoint needs its authorization token' });
  }
  const accessKeyId = `ASIASIM${simId('')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(-13)
    .toUpperCase()
    .padStart(13, '0')}`;
  const keys: TempKeys = { secretAccessKey: `sim/temp/${simId('')}`, sessionToken: `sim-session-${simId('')}`, until: Date.now() + 3600_000 };
  tempKeys(r).set(accessKeyId, keys);
  containerFetches.set(r.sim, (containerFetches.get(r.sim) ?? 0) + 1);
  sendJson(r, 200, {
    AccessKeyId: accessKeyId,
    SecretAccessKey: keys.secretAccessKey,
    Token: keys.sessionToken,
    Expiration: new Date(keys.until).toISOString(),
    RoleArn: 'arn:aws:iam::000000000000:role/tollgate-sim',
  });
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

type SourceData = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: SourceData): Buffer =>
  typeof d === 'string' ? Buffer.from(d, 'utf8') : ArrayBuffer.isView(d) ? Buffer.from(d.buffer, d.byteOffset, d.byteLength) : Buffer.from(d);
class Sha256 {
  private h: Hash | Hmac;
  constructor(private readonly secret?: SourceData) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(d: SourceData): void {
    this.h.update(bytes(d));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
  reset(): void {
    this.h = this.secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(this.secret));
  }
}

function awsError(r: SimRequest, status: number, type: string, message: string, headers: Record<string, string> = {}): void {
  sendJson(
    r,
    status,
    { message },
    { 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`, 'x-amzn-requestid': simId(''), ...headers },
  );
}

/** Checks the request's SigV4 signature (or API key); answers the error and returns false when it fails. */
async function authenticate(r: SimRequest): Promise<boolean> {
  const auth = r.req.headers.authorization ?? '';
  if (auth.startsWith('Bearer ')) {
    if (auth.slice(7) === SIM_BEDROCK_API_KEY) return true;
    awsError(r, 403, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
    return false;
  }
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) {
    awsError(r, 403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
    return false;
  }
  const [, keyId, , region, service, signedNames, signature] = m as unknown as string[];
  const temp = tempKeys(r).get(keyId!);
  const secretAccessKey =
    keyId === SIM_AWS_KEYS.accessKeyId ? SIM_AWS_KEYS.secretAccessKey : temp && temp.until > Date.now() ? temp.secretAccessKey : undefined;
  // Temporary keys sign with their session token (x-amz-security-token, a signed header); long-term keys without one.
  const sessionToken = r.req.headers['x-amz-security-token'];
  if (
    !secretAccessKey ||
    (temp ? sessionToken !== temp.sessionToken || !signedNames!.split(';').includes('x-amz-security-token') : sessionToken !== undefined)
  ) {
    awsError(r, 403, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
    return false;
  }
  const amzDate = String(r.req.headers['x-amz-date'] ?? '');
  const d = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!d) {
    awsError(r, 400, 'IncompleteSignatureException', 'X-Amz-Date is missing or malformed.');
    return false;
  }
  const date = new Date(Date.UTC(+d[1]!, +d[2]! - 1, +d[3]!, +d[4]!, +d[5]!, +d[6]!));
  const headers: Record<string, string> = {};
  for (const name of signedNames!.split(';')) {
    const v = r.req.headers[name];
    if (v !== undefined) headers[name] = Array.isArray(v) ? v.join(',') : v;
  }
  const signer = new SignatureV4({ service: service!, region: region!, credentials: { accessKeyId: keyId!, secretAccessKey }, sha256: Sha256 });
  const host = headers.host ?? '';
  const signed = await signer.sign(
    {
      method: r.req.method ?? 'POST',
      protocol: 'http:',
      hostname: host.split(':')[0]!,
      path: r.path,
      query: Object.fromEntries(r.query),
      headers,
      body: r.body,
    },
    { signingDate: date },
  );
  const expected = /Signature=([0-9a-f]{64})/.exec(String(signed.headers.authorization))?.[1];
  if (expected !== signature) {
    awsError(
      r,
      403,
      'InvalidSignatureException',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    );
    return false;
  }
  return true;
}

const textOf = (content: unknown): string =>
  (Array.isArray(content) ? content : [])
    .map((b) => (isObj(b) && typeof b.text === 'string' ? b.text : ''))
    .filter(Boolean)
    .join('\n');

const utf8 = new TextDecoder();
const codec = new EventStreamCodec(
  (b: Uint8Array) => utf8.decode(b),
  (t) => Buffer.from(t, 'utf8'),
);
/** One event-stream message, as Bedrock frames them. */
export function eventMessage(type: string, payload: unknown, kind: 'event' | 'exception' = 'event'): Buffer {
  return Buffer.from(
    codec.encode({
      headers: {
        [kind === 'event' ? ':event-type' : ':exception-type']: { type: 'string', value: type },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: kind },
      },
      body: Buffer.from(JSON.stringify(payload)),
    }),
  );
}

async function converse(r: SimRequest, stream: boolean): Promise<void> {
  if (!(await authenticate(r))) return;
  const body = r.json;
  if (!body || !Array.isArray(body.messages) || body.messages.length === 0) return awsError(r, 400, 'ValidationException', 'The provided request is not valid');
  const messages = body.messages as Json[];
  if (messages[0]?.role !== 'user')
    return awsError(
      r,
      400,
      'ValidationException',
      'A conversation must start with a user message. Try again with a conversation that starts with a user message.',
    );
  for (let i = 1; i < messages.length; i++) {
    if (messages[i]!.role === messages[i - 1]!.role)
      return awsError(
        r,
        400,
        'ValidationException',
        'A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.',
      );
  }
  const last = messages.at(-1)!;
  const prompt = textOf(last.content);
  const d = parseDirectives(prompt);
  await sleep(r.sim.latencyMs + d.slowMs, r.signal);
  if (r.signal.aborted) return;
  if (d.status === 429) return awsError(r, 429, 'ThrottlingException', 'Too many requests, please wait before trying again.', { 'retry-after': '7' });
  if (d.status === 500 || (d.fail && !stream))
    return awsError(r, 500, 'InternalServerException', 'The system encountered an unexpected error during processing. Try your request again.');

  const toolConfig = isObj(body.toolConfig) ? body.toolConfig : {};
  const tools: ToolSpec[] = (Array.isArray(toolConfig.tools) ? toolConfig.tools : []).flatMap((t: unknown) => {
    const spec = isObj(t) && isObj(t.toolSpec) ? t.toolSpec : undefined;
    return spec && typeof spec.name === 'string' ? [{ name: spec.name, schema: isObj(spec.inputSchema) ? spec.inputSchema.json : undefined }] : [];
  });
  const choice = isObj(toolConfig.toolChoice) ? toolConfig.toolChoice : {};
  const thinking =
    isObj(body.additionalModelRequestFields) && isObj(body.additionalModelRequestFields.thinking) ? body.additionalModelRequestFields.thinking : {};
  const plan = planAnswer({
    prompt,
    directives: d,
    tools,
    forced: isObj(choice.tool) && typeof choice.tool.name === 'string' ? choice.tool.name : choice.any ? '*' : undefined,
    afterToolResult: Array.isArray(last.content) && last.content.some((b) => isObj(b) && isObj(b.toolResult)),
    reasoning: thinking.type === 'enabled',
    parallel: true,
  });
  const inference = isObj(body.inferenceConfig) ? body.inferenceConfig : {};
  const max = typeof inference.maxTokens === 'number' ? inference.maxTokens : Infinity;
  let stopReason = plan.tools.length ? 'tool_use' : 'end_turn';
  if (!plan.tools.length && plan.text.length + plan.reasoning.length > max) {
    plan.text = plan.text.slice(0, Math.max(0, max - plan.reasoning.length));
    plan.outputTokens = plan.text.length + plan.reasoning.length;
    stopReason = 'max_tokens';
  }
  const inputTokens = countInputTokens(JSON.stringify([body.system ?? null, body.messages, body.toolConfig ?? null]));
  const usage = { inputTokens, outputTokens: plan.outputTokens, totalTokens: inputTokens + plan.outputTokens };
  const signature = Buffer.from(`sim-bedrock:${simId('')}`).toString('base64');

  if (!stream) {
    const content: Json[] = [];
    if (plan.reasoning.length) content.push({ reasoningContent: { reasoningText: { text: plan.reasoning.join(''), signature } } });
    for (const c of plan.tools) content.push({ toolUse: { toolUseId: `tooluse_${c.id}`, name: c.name, input: JSON.parse(c.arguments) as unknown } });
    if (!plan.tools.length) content.push({ text: plan.text.join('') });
    return sendJson(
      r,
      200,
      { output: { message: { role: 'assistant', content } }, stopReason, usage, metrics: { latencyMs: 42 } },
      { 'x-amzn-requestid': simId('') },
    );
  }

  r.res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': simId('') });
  const events: [string, Json][] = [['messageStart', { role: 'assistant' }]];
  let index = 0;
  if (plan.reasoning.length) {
    for (const t of plan.reasoning) events.push(['contentBlockDelta', { contentBlockIndex: index, delta: { reasoningContent: { text: t } } }]);
    events.push(
      ['contentBlockDelta', { contentBlockIndex: index, delta: { reasoningContent: { signature } } }],
      ['contentBlockStop', { contentBlockIndex: index }],
    );
    index++;
  }
  for (const [i, c] of plan.tools.entries()) {
    if (i > 0) events.push(['contentBlockStop', { contentBlockIndex: index++ }]);
    events.push(['contentBlockStart', { contentBlockIndex: index, start: { toolUse: { toolUseId: `tooluse_${c.id}`, name: c.name } } }]);
    for (const piece of c.pieces) events.push(['contentBlockDelta', { contentBlockIndex: index, delta: { toolUse: { input: piece } } }]);
  }
  if (!plan.tools.length) for (const t of plan.text) events.push(['contentBlockDelta', { contentBlockIndex: index, delta: { text: t } }]);
  events.push(['contentBlockStop', { contentBlockIndex: index }], ['messageStop', { stopReason }], ['metadata', { usage, metrics: { latencyMs: 42 } }]);
  const failAt = Math.floor(events.length / 2);
  for (const [i, [type, payload]] of events.entries()) {
    if (r.signal.aborted) return;
    if (i === failAt && d.fail) {
      r.res.end(eventMessage('internalServerException', { message: 'The system encountered an unexpected error during processing. (simulated)' }, 'exception'));
      return;
    }
    if (i === failAt && d.cut) {
      await sleep(20);
      r.res.destroy();
      return;
    }
    if (r.sim.chunkDelayMs > 0) await sleep(r.sim.chunkDelayMs, r.signal);
    r.res.write(eventMessage(type, payload));
  }
  r.res.end();
}

export const bedrockConverseRoutes: SimRoute[] = [
  { method: 'POST', path: '/model/:model/converse', handler: (r) => converse(r, false) },
  { method: 'POST', path: '/model/:model/converse-stream', handler: (r) => converse(r, true) },
  { method: 'GET', path: '/aws/container-credentials', handler: containerCredentials },
];
