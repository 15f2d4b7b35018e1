/**
 * Directives in the last user text drive failures for tests and demos:
 *   [sim:429]       answer 429 with retry-after
 *   [sim:500]       answer 500
 *   [sim:fail]      fail (chat streams: the protocol's in-stream error event after some content;
 *                   chat JSON: 500; tasks: the task fails)
 *   [sim:cut]       drop the stream midway (no terminal event, connection destroyed)
 *   [sim:tool]      call a tool (the first given) even when tool_choice leaves it to the model
 *   [sim:tool=N]    N calls in one turn (the given tools in turn), unless parallel calls are off
 *   [sim:slow=MS]   delay the first byte by MS
 *   [sim:pause=MS]  streams: send the head at once, then wait MS before the first event
 *   [sim:tokens=N]  answer with N output words (default: a short sentence)
 *   [sim:interleave] OpenAI Chat wire: parallel tool calls all open first, then their argument
 *                   pieces take turns
 *   [sim:refusal]   Anthropic wire: stop the answer with stop_reason "refusal", as Claude's
 *                   classifiers do
 *   [sim:frayed]    stream the way some servers and proxies do: no `event:` lines (the type in the
 *                   data only), CRLF line ends, a comment and an unknown event after the first event, every event written in 7-byte pieces;
 *                   the bytes written are recorded (RecordedRequest.sent)
 */
export interface Directives {
  status?: 429 | 500;
  fail: boolean;
  cut: boolean;
  slowMs: number;
  /** Streams: the wait between the head and the first event. */
  pauseMs: number;
  /** How many tool calls to make in one turn (0: none unless tool_choice forces one). */
  tool: number;
  tokens?: number;
  frayed: boolean;
  refusal: boolean;
  interleave: boolean;
}

const RE = /\[sim:([a-z0-9]+)(?:=(\d+))?\]/g;

export function parseDirectives(text: string): Directives {
  const d: Directives = { fail: false, cut: false, slowMs: 0, pauseMs: 0, tool: 0, frayed: false, refusal: false, interleave: false };
  if (!text.includes('[sim:')) return d;
  for (const m of text.matchAll(RE)) {
    const name = m[1];
    const n = m[2] === undefined ? undefined : Number(m[2]);
    if (name === '429') d.status = 429;
    else if (name === '500') d.status = 500;
    else if (name === 'fail') d.fail = true;
    else if (name === 'cut') d.cut = true;
    else if (name === 'tool') d.tool = Math.min(Math.max(n ?? 1, 1), 8);
    else if (name === 'frayed') d.frayed = true;
    else if (name === 'refusal') d.refusal = true;
    else if (name === 'interleave') d.interleave = true;
    else if (name === 'slow' && n !== undefined) d.slowMs = n;
    else if (name === 'pause' && n !== undefined) d.pauseMs = n;
    else if (name === 'tokens' && n !== undefined) d.tokens = Math.min(n, 100_000);
  }
  return d;
}

export const sleep = (ms: number, signal?: AbortSignal) =>
  ms <= 0
    ? Promise.resolve()
    : new Promise<void>((resolve) => {
        const t = setTimeout(resolve, ms);
        signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            resolve();
          },
          { once: true },
        );
      });
