import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { CompiledBackend } from '../../api/snapshot/index.js';
import type { Logger } from '../../kernel/log.js';

/**
 * The neutral boundary between the task engine and the upstream adapters under
 * proxy/upstreams/: a job in, outcomes out. The engine never sees a provider's wire format and
 * the adapters never see the ledger or the task table.
 */

/** What a task makes. */
export type TaskKind = 'image' | 'video';

/** A text-to-image, edit or inpaint request, normalised (see images/request.ts). */
export interface ImageJob {
  kind: 'image';
  mode: 'generate' | 'edit' | 'inpaint';
  prompt: string;
  negativePrompt?: string;
  n: number;
  width: number;
  height: number;
  /** Reduced ratio, e.g. "16:9". */
  aspectRatio: string;
  /** Whether the client gave pixels (pass them on) or only a ratio / nothing (the adapter may pick the provider's nearest size). */
  sizeFrom: 'pixels' | 'ratio';
  resolution: '1K' | '2K' | '4K';
  quality?: string;
  imageUrls: string[];
  maskUrl?: string;
}

/**
 * A video request, normalised (see videos/request.ts): defaults applied, aliases resolved and
 * inputs the model cannot take already dropped (listed on the task as ignored).
 */
export interface VideoJob {
  kind: 'video';
  mode: 'text-to-video' | 'image-to-video' | 'video-to-video';
  prompt: string;
  /** Whole seconds asked for (and held for). */
  duration: number;
  /** "480p", "720p", "1080p": the price key of pricing.perSecond. */
  resolution: string;
  /** Reduced ratio, e.g. "16:9". */
  aspectRatio: string;
  /** Whether audio is generated (and paid for): asked and offered by the model. */
  generateAudio: boolean;
  firstFrameUrl?: string;
  lastFrameUrl?: string;
  referenceImageUrls: string[];
  referenceVideoUrl?: string;
  /** What the video should not show, for providers that take it (others list it as ignored). */
  negativePrompt?: string;
}

export type TaskJob = ImageJob | VideoJob;

/** An input the gateway downloaded (through the URL guard) into a temporary file. */
export interface LocalMedia {
  path: string;
  size: number;
  contentType: string;
  filename: string;
}

export interface ProviderContext {
  backend: CompiledBackend;
  /** The gateway's upstream agent (keep-alive pools per origin). */
  dispatcher: Dispatcher;
  credential: string | undefined;
  taskId: string;
  /** Aborts on shutdown, lost lease, cancel or deadline. */
  signal: AbortSignal;
  log: Logger;
  /** Downloads a client-given media URL through the URL guard (field names the request field for errors). */
  fetchMedia(url: string, field: string): Promise<LocalMedia>;
}

/** One produced file: bytes the upstream returned inline, or a URL on the provider to copy from. */
export type ProviderOutput = { type: 'bytes'; data: Buffer; contentType?: string } | { type: 'url'; url: string; headers?: Record<string, string> };

export type ProviderOutcome =
  | { state: 'succeeded'; outputs: ProviderOutput[]; usage?: Record<string, number> }
  | { state: 'pending'; upstreamId: string; data?: Record<string, unknown> }
  | { state: 'failed'; code: string; message: string };

/** A failed call to the provider. Retryable failures (429, 5xx, connection) are tried again until the deadline. */
export class ProviderError extends Error {
  constructor(
    readonly retryable: boolean,
    readonly code: string,
    message: string,
    readonly opts: { status?: number; retryAfterMs?: number } = {},
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

/**
 * An upstream adapter. `J` narrows the jobs it is given: supports() is asked first, so an
 * adapter typed for ImageJob only ever receives image jobs.
 */
export interface TaskProvider<J extends TaskJob = TaskJob> {
  readonly name: string;
  supports(kind: TaskKind, mode: string): boolean;
  /** Job fields this provider cannot pass on (for this backend's model): dropped and listed on the task as ignored. */
  ignores?(job: J, backend: CompiledBackend): string[];
  submit(job: J, ctx: ProviderContext): Promise<ProviderOutcome>;
  /** Asynchronous providers: the state of an upstream task created by submit. */
  poll?(upstreamId: string, data: Record<string, unknown> | null, ctx: ProviderContext): Promise<ProviderOutcome>;
  /** Best effort: stop the upstream work of a cancelled task. */
  cancel?(upstreamId: string, data: Record<string, unknown> | null, ctx: ProviderContext): Promise<void>;
  /** Opens a `url` output for copying (auth headers of the provider, if any). */
  open?(output: Extract<ProviderOutput, { type: 'url' }>, ctx: ProviderContext): Promise<{ body: Readable; contentType?: string }>;
}
