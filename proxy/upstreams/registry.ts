import type { ProviderName } from '../../api/snapshot/index.js';
import { anthropic } from './anthropic/index.js';
import { azureOpenai } from './azure/index.js';
import { bedrock } from './bedrock/index.js';
import { gemini } from './gemini/index.js';
import { openaiCompatible, openaiCompatibleFor } from './openai-compatible/index.js';
import { openaiImages } from './openai/images.js';
import { openai } from './openai/index.js';
import { openaiVideos } from './openai/videos.js';
import { replicate } from './replicate/index.js';
import { vertex } from './vertex/index.js';
import type { TaskKind, TaskProvider } from './task-provider.js';
import type { CompiledBackend, Provider } from './types.js';

/** What one upstream provider offers: a chat endpoint set, task adapters, or both. */
export interface ProviderEntry {
  chat?: Provider;
  /** The chat endpoint set of one backend, where its settings change what it speaks (openai-compatible `paths`). */
  chatFor?: (backend: CompiledBackend) => Provider;
  /** The first that supports a task's kind and mode serves it. */
  tasks?: TaskProvider[];
}

/** The one registry of upstream providers, by the ModelRoute backend's provider name. */
const PROVIDERS: Partial<Record<ProviderName, ProviderEntry>> = {
  openai: { chat: openai, tasks: [openaiImages, openaiVideos] },
  anthropic: { chat: anthropic },
  'openai-compatible': { chat: openaiCompatible, chatFor: openaiCompatibleFor },
  replicate: { tasks: [replicate] },
  gemini: { chat: gemini },
  'azure-openai': { chat: azureOpenai },
  bedrock: { chat: bedrock },
  vertex: { chat: vertex },
};

export function chatProvider(name: ProviderName, backend?: CompiledBackend): Provider | undefined {
  const entry = PROVIDERS[name];
  return backend && entry?.chatFor ? entry.chatFor(backend) : entry?.chat;
}

export function taskProvider(name: ProviderName, kind: TaskKind, mode: string): TaskProvider | undefined {
  return PROVIDERS[name]?.tasks?.find((p) => p.supports(kind, mode));
}
