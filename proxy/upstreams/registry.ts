import type { ProviderName } from '../../api/snapshot/index.js';
import { anthropic } from './anthropic/index.js';
import { arkImages } from './ark/images.js';
import { arkVideos } from './ark/videos.js';
import { azureOpenai } from './azure/index.js';
import { bedrock } from './bedrock/index.js';
import { fal } from './fal/index.js';
import { gemini } from './gemini/index.js';
import { geminiImages } from './gemini-media/images.js';
import { veo } from './gemini-media/veo.js';
import { openaiCompatible, openaiCompatibleFor } from './openai-compatible/index.js';
import { openaiImages } from './openai/images.js';
import { openai } from './openai/index.js';
import { openaiVideos } from './openai/videos.js';
import { replicate } from './replicate/index.js';
import { vertex } from './vertex/index.js';
import type { TaskKind, TaskProvider } from './task-provider.js';
import type { CompiledBackend, Operation, Provider } from './types.js';

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
  fal: { tasks: [fal] },
  gemini: { chat: gemini, tasks: [geminiImages, veo] },
  ark: { tasks: [arkImages, arkVideos] },
  'azure-openai': { chat: azureOpenai },
  bedrock: { chat: bedrock },
  vertex: { chat: vertex },
};

export function chatProvider(name: ProviderName, backend?: CompiledBackend): Provider | undefined {
  const entry = PROVIDERS[name];
  return backend && entry?.chatFor ? entry.chatFor(backend) : entry?.chat;
}

/** Whether a backend serves `op` natively: its provider speaks it, and (a compatible server) offers it. */
export function speaks(backend: CompiledBackend, op: Operation): boolean {
  return chatProvider(backend.provider, backend)?.speaks.has(op) ?? false;
}

export function taskProvider(name: ProviderName, kind: TaskKind, mode: string): TaskProvider | undefined {
  return PROVIDERS[name]?.tasks?.find((p) => p.supports(kind, mode));
}
