import { writeFileSync } from 'node:fs';
import { WebSocket } from 'undici';

/**
 * A target's live memory, read through its inspector: what a heap holds right after full
 * collections does not depend on when V8 last collected (RSS and "heap used" read at a random
 * moment moved by more than the difference between the targets). The target is started with
 * NODE_OPTIONS=--inspect-port=PORT and its inspector opened by SIGUSR1, the way Node documents
 * for a running process; nothing in it changes for the benchmark.
 */
export interface Live {
  /** Full collections, then the JavaScript heap in use and the memory of ArrayBuffers (Buffers) in use, KiB. */
  collect(): Promise<{ heapKiB: number; buffersKiB: number }>;
  /** A heap snapshot (after the collections it makes itself) written to `file`, for DevTools' Memory tab or a diff. */
  snapshot(file: string): Promise<void>;
  close(): void;
}

export async function attach(pid: number, port: number): Promise<Live> {
  process.kill(pid, 'SIGUSR1');
  let url: string | undefined;
  for (let i = 0; i < 100 && !url; i++) {
    await new Promise((r) => setTimeout(r, 100));
    try {
      const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
      url = list[0]?.webSocketDebuggerUrl;
    } catch {
      // not listening yet
    }
  }
  if (!url) throw new Error(`process ${pid}: no inspector on port ${port}`);
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.addEventListener('open', resolve, { once: true });
    ws.addEventListener('error', reject, { once: true });
  });
  let id = 0;
  const waiting = new Map<number, (result: Record<string, any>) => void>();
  let chunks: string[] = [];
  ws.addEventListener('message', (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; method?: string; params?: { chunk?: string }; result?: Record<string, any> };
    if (m.method === 'HeapProfiler.addHeapSnapshotChunk') chunks.push(m.params!.chunk!);
    if (m.id === undefined) return;
    waiting.get(m.id)?.(m.result ?? {});
    waiting.delete(m.id);
  });
  const post = (method: string, params: object = {}) =>
    new Promise<Record<string, any>>((resolve) => {
      waiting.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  return {
    async collect() {
      // Three rounds: what one collection frees (weak references, finalizers) is taken by the next.
      for (let i = 0; i < 3; i++) await post('HeapProfiler.collectGarbage');
      const heap = await post('Runtime.getHeapUsage');
      const buffers = await post('Runtime.evaluate', { expression: 'process.memoryUsage().arrayBuffers', includeCommandLineAPI: true });
      return { heapKiB: Number(heap.usedSize) / 1024, buffersKiB: Number(buffers.result?.value) / 1024 };
    },
    async snapshot(file) {
      chunks = [];
      await post('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
      writeFileSync(file, chunks.join(''));
      chunks = [];
    },
    close: () => ws.close(),
  };
}
