/**
 * Image size rules (pure). `size` is pixels ("1536x1024") or a ratio ("16:9"); the resolution
 * tier is 1K, 2K or 4K. The tier of a pixel size is decided by its longer side: up to 1536 px is
 * 1K, up to 3072 px is 2K, above is 4K. A ratio at a tier gets the tier's side (1024, 2048,
 * 4096 px) on its longer edge and the other edge rounded to a multiple of 8.
 */
export type Tier = '1K' | '2K' | '4K';
export const TIERS: readonly Tier[] = ['1K', '2K', '4K'];
export const TIER_SIDE: Record<Tier, number> = { '1K': 1024, '2K': 2048, '4K': 4096 };

export const MIN_SIDE = 64;
export const MAX_SIDE = 8192;
/** Ratios up to 8:1 either way. */
const MAX_RATIO = 8;

export type SizeSpec = { type: 'pixels'; width: number; height: number } | { type: 'ratio'; w: number; h: number } | { type: 'tier'; tier: Tier };

/** Parses a size string, or returns why it is not one (the message completes "size ..."). */
export function parseSize(s: string): SizeSpec | { error: string } {
  const t = s.trim();
  const tier = parseTier(t);
  if (tier) return { type: 'tier', tier };
  let m = /^(\d{1,5})\s*[x×*]\s*(\d{1,5})$/i.exec(t);
  if (m) {
    const width = Number(m[1]);
    const height = Number(m[2]);
    if (width < MIN_SIDE || height < MIN_SIDE || width > MAX_SIDE || height > MAX_SIDE) {
      return { error: `"${s}" is out of range: width and height must each be ${MIN_SIDE} to ${MAX_SIDE} pixels` };
    }
    if (Math.max(width, height) / Math.min(width, height) > MAX_RATIO) return { error: `"${s}" is too narrow: at most ${MAX_RATIO}:1` };
    return { type: 'pixels', width, height };
  }
  m = /^(\d{1,3})\s*:\s*(\d{1,3})$/.exec(t);
  if (m) {
    const w = Number(m[1]);
    const h = Number(m[2]);
    if (w < 1 || h < 1) return { error: `"${s}" is not a ratio: both terms must be at least 1` };
    if (Math.max(w, h) / Math.min(w, h) > MAX_RATIO) return { error: `"${s}" is too narrow: at most ${MAX_RATIO}:1` };
    return { type: 'ratio', w, h };
  }
  return { error: `"${s.slice(0, 40)}" is neither pixels such as 1024x1024 nor a ratio such as 16:9` };
}

/** "1K", "2k" -> the tier; anything else undefined. */
export function parseTier(s: string): Tier | undefined {
  const u = s.trim().toUpperCase();
  return (TIERS as readonly string[]).includes(u) ? (u as Tier) : undefined;
}

export function tierOfPixels(width: number, height: number): Tier {
  const side = Math.max(width, height);
  return side <= 1536 ? '1K' : side <= 3072 ? '2K' : '4K';
}

export function pixelsFor(w: number, h: number, tier: Tier): { width: number; height: number } {
  const side = TIER_SIDE[tier];
  const other = Math.max(MIN_SIDE, Math.round((side * Math.min(w, h)) / Math.max(w, h) / 8) * 8);
  return w >= h ? { width: side, height: other } : { width: other, height: side };
}

export function reduceRatio(w: number, h: number): string {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const g = gcd(w, h);
  return `${w / g}:${h / g}`;
}

export interface ResolvedSize {
  width: number;
  height: number;
  aspectRatio: string;
  resolution: Tier;
  sizeFrom: 'pixels' | 'ratio';
}

/**
 * size (optional) + tier (optional) -> pixels, ratio and tier. A tier that contradicts the
 * pixels given is an error (it would price the picture at another tier). Returns the message of
 * a 400 and the field at fault, or the resolved size.
 */
export function resolveSize(size: string | undefined, tier: Tier | undefined): ResolvedSize | { error: string; field: 'size' | 'resolution' } {
  const spec: SizeSpec | { error: string } = size === undefined ? { type: 'ratio', w: 1, h: 1 } : parseSize(size);
  if ('error' in spec) return { error: `size ${spec.error}`, field: 'size' };
  if (spec.type === 'tier') {
    if (tier && tier !== spec.tier) return { error: `size "${size}" and resolution "${tier}" disagree; give the tier once`, field: 'resolution' };
    return { ...pixelsFor(1, 1, spec.tier), aspectRatio: '1:1', resolution: spec.tier, sizeFrom: 'ratio' };
  }
  if (spec.type === 'pixels') {
    const inferred = tierOfPixels(spec.width, spec.height);
    if (tier && tier !== inferred) {
      return {
        error: `resolution "${tier}" does not match size ${spec.width}x${spec.height}, which is ${inferred} (longer side up to 1536 px: 1K, up to 3072: 2K, above: 4K)`,
        field: 'resolution',
      };
    }
    return { width: spec.width, height: spec.height, aspectRatio: reduceRatio(spec.width, spec.height), resolution: inferred, sizeFrom: 'pixels' };
  }
  const t = tier ?? '1K';
  return { ...pixelsFor(spec.w, spec.h, t), aspectRatio: reduceRatio(spec.w, spec.h), resolution: t, sizeFrom: 'ratio' };
}
