import type { CompiledBackend } from '../../../api/snapshot/index.js';
import { ProviderError, type ProviderContext, type ProviderOutcome, type ProviderOutput, type TaskJob, type TaskProvider } from '../task-provider.js';
import { callProvider, openUrl, statusError, type ProviderResponse } from '../task-http.js';
import { falFamily, falIgnored, falInput } from './families.js';

/**
 * fal.ai's queue API (baseURL https://queue.fal.run): POST /{endpoint id} submits the input and
 * answers a request id; GET /{owner}/{app}/requests/{id}/status reports IN_QUEUE, IN_PROGRESS or
 * COMPLETED; GET /{owner}/{app}/requests/{id} is the result (the endpoint's output JSON, or the
 * run's error with its HTTP status); PUT .../cancel asks it to stop. Status and result paths
 * take the endpoint id's first two segments only. Auth: `Authorization: Key <key>`. The input
 * fields come from the endpoint's family (families.ts); fal fetches input URLs itself.
 */
export const fal: TaskProvider = {
  name: 'fal',
  supports: (kind) => kind === 'image' || kind === 'video',
  ignores: (job, backend) => falIgnored(job, falFamily(backend.model)),

  async submit(job, ctx) {
    const model = ctx.backend.model;
    const r = await callProvider(ctx, {
      method: 'POST',
      path: `/${endpointPath(model)}`,
      headers: { ...auth(ctx), 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(falInput(job, falFamily(model)))),
      signal: ctx.signal,
    });
    if (r.status >= 400) throw statusError(r, detailOf(r.json).message, detailOf(r.json).code);
    const id = (r.json as { request_id?: unknown } | undefined)?.request_id;
    if (typeof id !== 'string' || id === '')
      return { state: 'failed', code: 'upstream_invalid_response', message: 'the upstream queued the request without an id' };
    return { state: 'pending', upstreamId: id, data: { kind: job.kind } };
  },

  async poll(upstreamId, data, ctx) {
    const base = requestPath(ctx.backend, upstreamId);
    const s = await callProvider(ctx, { method: 'GET', path: `${base}/status`, headers: auth(ctx), signal: ctx.signal });
    if (s.status >= 400) throw statusError(s, detailOf(s.json).message, detailOf(s.json).code);
    const status = s.json as { status?: string; error?: unknown; error_type?: unknown } | undefined;
    if (status?.status === 'IN_QUEUE' || status?.status === 'IN_PROGRESS') return { state: 'pending', upstreamId, ...(data ? { data } : {}) };
    if (status?.status !== 'COMPLETED')
      return { state: 'failed', code: 'upstream_invalid_response', message: `the upstream reported a request in an unknown state "${String(status?.status)}"` };
    // Newer queue answers name a failed run's error on the status itself.
    if (status.error !== undefined && status.error !== null) {
      const code = typeof status.error_type === 'string' ? status.error_type : 'upstream_failed';
      return { state: 'failed', code, message: `the upstream request failed: ${text(status.error)}` };
    }
    const r = await callProvider(ctx, { method: 'GET', path: base, headers: auth(ctx), signal: ctx.signal });
    return resultOf(r, data?.kind === 'video' ? 'video' : 'image');
  },

  async cancel(upstreamId, _data, ctx) {
    const r = await callProvider(ctx, { method: 'PUT', path: `${requestPath(ctx.backend, upstreamId)}/cancel`, headers: auth(ctx), signal: ctx.signal });
    // 400 ALREADY_COMPLETED and 404 NOT_FOUND leave nothing to stop.
    if (r.status >= 500 || r.status === 429) throw statusError(r, detailOf(r.json).message, undefined);
  },

  open: (output, ctx) => openUrl(ctx, output.url, ctx.signal, auth(ctx)),
};

const auth = (ctx: ProviderContext): Record<string, string> => (ctx.credential ? { authorization: `Key ${ctx.credential}` } : {});

/** The endpoint id as a path, each segment escaped. */
function endpointPath(model: string): string {
  return model
    .split('/')
    .filter((s) => s !== '')
    .map(encodeURIComponent)
    .join('/');
}

/** Status, result and cancel live under the endpoint's owner and app only. */
function requestPath(backend: CompiledBackend, id: string): string {
  const [owner, app] = backend.model.split('/').filter((s) => s !== '');
  return `/${encodeURIComponent(owner ?? '')}/${encodeURIComponent(app ?? '')}/requests/${encodeURIComponent(id)}`;
}

interface FalFile {
  url?: unknown;
}

/** The result of a COMPLETED request: the output files, or the run's error. */
function resultOf(r: ProviderResponse, kind: TaskJob['kind']): ProviderOutcome {
  if (r.status >= 400) {
    const d = detailOf(r.json);
    // The run itself failed (its error is the result): final. A busy or broken queue front: try again.
    if (r.status === 429 || r.status === 502 || r.status === 503 || r.status === 504) throw statusError(r, d.message, d.code);
    return { state: 'failed', code: d.code ?? 'upstream_failed', message: `the upstream request failed (${r.status})${d.message ? `: ${d.message}` : ''}` };
  }
  const out = r.json as { video?: FalFile | FalFile[]; videos?: FalFile[]; images?: FalFile[]; image?: FalFile } | undefined;
  const files = [out?.video, out?.videos, out?.images, out?.image].flatMap((f) => (f === undefined ? [] : Array.isArray(f) ? f : [f]));
  const outputs: ProviderOutput[] = [];
  for (const f of files) {
    if (typeof f?.url !== 'string') continue;
    const inline = /^data:([^;,]+)?;base64,/.exec(f.url);
    if (inline) outputs.push({ type: 'bytes', data: Buffer.from(f.url.slice(inline[0].length), 'base64'), ...(inline[1] ? { contentType: inline[1] } : {}) });
    else outputs.push({ type: 'url', url: f.url });
  }
  if (outputs.length === 0) throw new ProviderError(false, 'no_output', 'the upstream request completed without output files');
  // A video's duration is read from the file (fal reports none).
  return { state: 'succeeded', outputs, usage: kind === 'image' ? { images: outputs.length } : {} };
}

/** fal's error bodies: `{detail: "text"}` or `{detail: [{msg, type, loc}]}` (validation, content policy). */
function detailOf(json: unknown): { message?: string; code?: string } {
  const d = (json as { detail?: unknown } | undefined)?.detail;
  if (typeof d === 'string') return { message: d };
  if (Array.isArray(d) && d.length > 0) {
    const first = d[0] as { msg?: unknown; type?: unknown };
    const message = d.map((x: { msg?: unknown }) => (typeof x?.msg === 'string' ? x.msg : JSON.stringify(x))).join('; ');
    return { message, ...(typeof first?.type === 'string' ? { code: first.type } : {}) };
  }
  return d === undefined ? {} : { message: text(d) };
}

const text = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));
