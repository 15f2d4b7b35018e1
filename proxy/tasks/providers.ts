import type { ProviderName } from '../../api/snapshot/index.js';
import { openaiImages } from '../upstreams/openai/images.js';
import { replicate } from '../upstreams/replicate/index.js';
import type { TaskProvider } from './provider.js';
import type { TaskKind } from './types.js';

/**
 * Task providers by backend provider name; the first that supports the task's kind and mode
 * serves it. Video adapters join the lists (e.g. openai: [openaiImages, openaiVideos]).
 */
const TASK_PROVIDERS: Partial<Record<ProviderName, TaskProvider[]>> = {
  openai: [openaiImages],
  replicate: [replicate],
};

export function taskProvider(name: ProviderName, kind: TaskKind, mode: string): TaskProvider | undefined {
  return TASK_PROVIDERS[name]?.find((p) => p.supports(kind, mode));
}
