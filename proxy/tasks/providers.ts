import type { ProviderName } from '../../api/snapshot/index.js';
import { openaiImages } from '../upstreams/openai/images.js';
import { openaiVideos } from '../upstreams/openai/videos.js';
import { replicate } from '../upstreams/replicate/index.js';
import type { TaskProvider } from './provider.js';
import type { TaskKind } from './types.js';

/** Task providers by backend provider name; the first that supports the task's kind and mode serves it. */
const TASK_PROVIDERS: Partial<Record<ProviderName, TaskProvider[]>> = {
  openai: [openaiImages, openaiVideos],
  replicate: [replicate],
};

export function taskProvider(name: ProviderName, kind: TaskKind, mode: string): TaskProvider | undefined {
  return TASK_PROVIDERS[name]?.find((p) => p.supports(kind, mode));
}
