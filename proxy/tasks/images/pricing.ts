import type { TaskKindSpec } from '../types.js';
import type { Tier } from './size.js';

/**
 * Image prices: `pricing.perImage` of the ModelRoute (times the group's multiplier, or the
 * group's override), keyed by tier ("2K") or by tier and quality ("2K:high"). The most specific
 * key wins. A model with no perImage table is free; with one, a tier it does not list is not
 * offered. Pure.
 */
export function imageUnitPrice(perImage: Map<string, bigint>, tier: Tier, quality: string | undefined): { unit: bigint; key: string } | { offered: string[] } {
  if (perImage.size === 0) return { unit: 0n, key: '' };
  if (quality !== undefined) {
    const k = `${tier}:${quality}`;
    const v = perImage.get(k);
    if (v !== undefined) return { unit: v, key: k };
  }
  const v = perImage.get(tier);
  if (v !== undefined) return { unit: v, key: tier };
  const offered = [...new Set([...perImage.keys()].map((k) => k.split(':')[0]!))].sort();
  return { offered };
}

/** Image tasks: held n x unit at submission; charged for the images produced (never more than n). */
export const imageKind: TaskKindSpec = {
  kind: 'image',
  idPrefix: 'img_',
  initialStatus: 'queued',
  defaultExtension: 'png',
  charge(task, got) {
    const unit = BigInt(task.price.unit ?? '0');
    const n = typeof task.request.n === 'number' ? task.request.n : got.outputs;
    return unit * BigInt(Math.min(got.outputs, n));
  },
  billed(task, got) {
    const n = typeof task.request.n === 'number' ? task.request.n : got.outputs;
    return { images: Math.min(got.outputs, n) };
  },
};
