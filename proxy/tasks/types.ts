import type { Transform } from 'node:stream';
import type { ProviderName } from '../../api/snapshot/index.js';

import type { TaskKind } from '../upstreams/task-provider.js';

/** The task engine's own vocabulary, shared by image and video tasks. */
export type { TaskKind };
export type TaskStatus = 'queued' | 'processing' | 'succeeded' | 'failed' | 'cancelled';
export const ACTIVE_STATUSES: readonly TaskStatus[] = ['queued', 'processing'];
export const isActive = (s: TaskStatus) => s === 'queued' || s === 'processing';

/** The backend an upstream task lives on: enough to find it (and its credential) in a later config. */
export interface BackendRef {
  provider: ProviderName;
  baseURL: string;
  model: string;
}

/** One result file in result storage. */
export interface StoredResult {
  key: string;
  contentType: string;
  bytes: number;
}

export interface TaskRow {
  id: string;
  kind: TaskKind;
  mode: string;
  status: TaskStatus;
  keyHash: string;
  keyName: string;
  account: string;
  group: string;
  model: string;
  /** The normalised job (ImageJob, VideoJob): what providers receive. */
  request: Record<string, unknown>;
  requestHash: string;
  idempotencyKey: string | null;
  ignored: string[];
  backend: BackendRef | null;
  upstreamId: string | null;
  upstreamState: Record<string, unknown> | null;
  attempts: number;
  nextRunAt: Date;
  leaseOwner: string | null;
  leaseUntil: Date | null;
  deadlineAt: Date;
  holdId: string;
  holdMicro: bigint;
  /** Unit prices fixed at submission, micro-credits as decimal strings. */
  price: Record<string, string>;
  chargedMicro: bigint | null;
  results: StoredResult[] | null;
  usage: Record<string, number> | null;
  errorCode: string | null;
  errorMessage: string | null;
  webhookUrl: string | null;
  webhookSecret: string | null;
  createdAt: Date;
  finishedAt: Date | null;
}

/** What the upstream delivered, as the kind's billing sees it. */
export interface TaskYield {
  /** Result files stored. */
  outputs: number;
  /** What the upstream reported (e.g. seconds of video), when it reported anything. */
  usage: Record<string, number>;
}

/**
 * What differs between image and video tasks for the engine: ids, the first visible status,
 * the deadline and the charge on success. Validation and pricing at submission live with each
 * kind's endpoints.
 */
export interface TaskKindSpec {
  kind: TaskKind;
  /** "img_", "vid_". */
  idPrefix: string;
  /** What the submission answers: images `queued`, videos `processing` (the contract). */
  initialStatus: 'queued' | 'processing';
  /** Micro-credits captured on success, from the prices fixed at submission; never above what
   * the task could have cost, so the rest of the hold is released by the same capture. */
  charge(task: TaskRow, got: TaskYield): bigint;
  /** What the charge counted, for the task's usage record: images, or seconds of video. */
  billed(task: TaskRow, got: TaskYield): { images?: number; seconds?: number };
  /** File extension for a result's content type when the upstream names none we know. */
  defaultExtension: string;
  /**
   * Reads what the kind bills from a result while it streams into storage (videos: the MP4's
   * duration), for upstreams that report nothing. What the upstream reports wins.
   */
  measure?(): { tap: Transform; usage(): Record<string, number> };
}
