/**
 * Whether to stream (DESIGN.md "Streaming default"): an explicit `stream` wins; when absent, the
 * contract's default (true) applies unless the Accept header asks only for JSON, which is what the
 * official SDKs send on non-streaming calls. Claude Code sends `Accept: application/json` with
 * `stream: true`, so Accept is never read when `stream` is present.
 */
export function decideStream(explicit: boolean | undefined, accept: string | undefined): boolean {
  if (explicit !== undefined) return explicit;
  if (!accept) return true;
  let json = false;
  for (const part of accept.split(',')) {
    const type = part.split(';')[0]!.trim().toLowerCase();
    if (type === 'application/json') json = true;
    else if (type) return true; // text/event-stream, */*, text/* ... anything else admits a stream
  }
  return !json;
}
