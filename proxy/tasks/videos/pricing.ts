import type { Prices } from '../../config/runtime.js';
import type { VideoJob } from '../../upstreams/task-provider.js';
import type { TaskKindSpec } from '../types.js';
import { mp4DurationProbe } from './mp4-probe.js';

/**
 * Video prices (pure): `pricing.perSecond` of the ModelRoute keyed by resolution ("720p"),
 * plus `audioPerSecond` when audio is generated, both after the group's multiplier or
 * overrides. A model without perSecond is free; with one, a resolution it does not list is not
 * offered.
 */
export function videoUnitPrice(
  prices: Pick<Prices, 'perSecond' | 'audioPerSecond'>,
  job: Pick<VideoJob, 'resolution' | 'generateAudio'>,
): { perSecond: bigint; audioPerSecond: bigint } | { offered: string[] } {
  let perSecond = 0n;
  if (prices.perSecond.size > 0) {
    const v = prices.perSecond.get(job.resolution);
    if (v === undefined) return { offered: [...prices.perSecond.keys()].sort() };
    perSecond = v;
  }
  return { perSecond, audioPerSecond: job.generateAudio ? prices.audioPerSecond : 0n };
}

/** What a submission holds: the whole asked duration at the unit prices. */
export function videoHold(unit: { perSecond: bigint; audioPerSecond: bigint }, duration: number): bigint {
  return BigInt(duration) * (unit.perSecond + unit.audioPerSecond);
}

/**
 * The charge for `seconds` of video actually delivered (as the upstream reports it, or as the
 * file says), never more than the duration asked (and held): per second, pro rata to the
 * millisecond, rounded down to the micro-credit. Without any report, the asked duration.
 */
export function videoCharge(unit: { perSecond: bigint; audioPerSecond: bigint }, asked: number, seconds: number | undefined): bigint {
  return ((unit.perSecond + unit.audioPerSecond) * BigInt(chargedMs(asked, seconds))) / 1000n;
}

/** The milliseconds a video is charged for: as delivered, never more than asked; the asked ones without a report. */
function chargedMs(asked: number, seconds: number | undefined): number {
  const askedMs = asked * 1000;
  return seconds !== undefined && Number.isFinite(seconds) && seconds >= 0 ? Math.min(askedMs, Math.round(seconds * 1000)) : askedMs;
}

/** Video tasks: answered `processing`; held for the asked duration, charged on the actual one. */
export const videoKind: TaskKindSpec = {
  kind: 'video',
  idPrefix: 'vid_',
  initialStatus: 'processing',
  defaultExtension: 'mp4',
  charge(task, got) {
    const unit = { perSecond: BigInt(task.price.perSecond ?? '0'), audioPerSecond: BigInt(task.price.audioPerSecond ?? '0') };
    return videoCharge(unit, Number(task.request.duration), got.usage.seconds);
  },
  billed(task, got) {
    return { seconds: chargedMs(Number(task.request.duration), got.usage.seconds) / 1000 };
  },
  measure() {
    const probe = mp4DurationProbe();
    return {
      tap: probe.tap,
      usage: (): Record<string, number> => {
        const s = probe.seconds();
        return s === undefined ? {} : { seconds: s };
      },
    };
  },
};
