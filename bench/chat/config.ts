import { createHash } from 'node:crypto';

export const BENCH_KEY = 'sk-service-bench';
export const BENCH_KEY_HASH = `sha256:${createHash('sha256').update(BENCH_KEY).digest('hex')}`;

/** A chat request of a realistic small size (about 2 KB: a system prompt and a few turns). */
export function chatBody(model: string, stream: boolean): string {
  const filler = 'You are a helpful assistant that answers briefly and precisely. '.repeat(12);
  return JSON.stringify({
    model,
    stream,
    messages: [
      { role: 'system', content: filler },
      { role: 'user', content: 'What does a gateway do?' },
      { role: 'assistant', content: 'It forwards requests to upstream models and meters them.' },
      { role: 'user', content: 'And how is usage counted?' },
    ],
    temperature: 0.2,
  });
}
