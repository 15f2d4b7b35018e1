import { startSimulator } from '../../simulator/index.js';
import { parseFlags, portFlag, wholeFlag } from '../args.js';
import type { Command } from '../command.js';
import { untilSignal } from '../signals.js';

export const command: Command = {
  summary: 'run the offline upstream simulator',
  usage: `Usage: tollgate simulate [--port N] [--host H] [--latency MS] [--chunk-delay MS]

Serves the providers' wire protocols offline with deterministic answers:
  POST /v1/chat/completions          OpenAI Chat Completions (JSON and SSE; tool calls)
  POST /v1/responses                 OpenAI Responses (JSON and SSE; reasoning, function calls)
  POST /v1/messages                  Anthropic Messages (JSON and SSE; thinking, tool use, caching)
  POST /v1/messages/count_tokens     Anthropic token counting
  POST /v1/images/generations        OpenAI Images (real PNGs)
  POST /v1/images/edits              OpenAI image edits (multipart)
  POST /v1/videos                    OpenAI videos (real MP4s; GET /v1/videos/{id}, GET /v1/videos/{id}/content)
  POST /v1/predictions               Replicate-style predictions (also /v1/models/{owner}/{name}/predictions;
                                     GET /v1/predictions/{id}, POST /v1/predictions/{id}/cancel)
  POST /fal/{endpoint id}            fal.ai queue (GET .../requests/{id}/status, GET .../requests/{id}, PUT .../cancel)
  POST /gmedia/v1beta/models/{m}:... Gemini images (:generateContent, inline PNGs) and Veo (:predictLongRunning,
                                     operations, file downloads); Vertex paths under /gmedia/v1/projects/...
  POST /ark/api/v3/...               ByteDance ModelArk: Seedream /images/generations, Seedance /contents/generations/tasks
  GET  /files/{name}                 files the simulator hands out by URL

Directives in the last user message (or image prompt) drive failures: [sim:429] [sim:500]
[sim:fail] (chat streams: the protocol's in-stream error) [sim:cut] (drop the stream midway)
[sim:slow=MS] [sim:tokens=N] [sim:tool] (call the first tool given)
[sim:frayed] (streams without event: lines, with CRLF, a comment, an unknown event, 7-byte pieces).

  --port N          listen port (default 8090)
  --host H          listen address (default 127.0.0.1)
  --latency MS      delay before the first byte of every answer (default 0)
  --chunk-delay MS  delay between stream events (default 0)`,
  async run(argv) {
    const { values } = parseFlags(argv, {
      port: { type: 'string' },
      host: { type: 'string' },
      latency: { type: 'string' },
      'chunk-delay': { type: 'string' },
    });
    const ms = (name: string, v: string | undefined) => wholeFlag(name, v, 'milliseconds') ?? 0;
    const sim = await startSimulator({
      port: portFlag('port', values.port, 8090),
      host: values.host ?? '127.0.0.1',
      latencyMs: ms('latency', values.latency),
      chunkDelayMs: ms('chunk-delay', values['chunk-delay']),
    });
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level: 'info', msg: 'simulator listening', url: sim.url })}\n`);
    await untilSignal();
    await sim.close();
    return 0;
  },
};
