import type { CompiledGroup, CompiledKey, CompiledModel, GatewayConfig, MicroPricing } from '../../api/snapshot/index.js';

/** Effective prices as bigint micro-credits (per million tokens for chat). */
export interface Prices {
  inputPerMillion: bigint;
  cachedInputPerMillion: bigint;
  outputPerMillion: bigint;
  perImage: Map<string, bigint>;
  perSecond: Map<string, bigint>;
  audioPerSecond: bigint;
}

export interface GroupModel {
  model: CompiledModel;
  prices: Prices;
}

export interface RuntimeGroup extends CompiledGroup {
  entries: Map<string, GroupModel>;
}

/**
 * The hot-path form of a GatewayConfig: maps and bigints built once per swap, so a request
 * does lookups only. Immutable; a request keeps the one it started with.
 */
export class RuntimeConfig {
  readonly version: string;
  readonly keys: Map<string, CompiledKey>;
  readonly models: Map<string, CompiledModel>;
  readonly groups: Map<string, RuntimeGroup>;

  constructor(readonly snapshot: GatewayConfig) {
    this.version = snapshot.version;
    this.keys = new Map(Object.entries(snapshot.keys));
    this.models = new Map(Object.entries(snapshot.models));
    this.groups = new Map();
    for (const g of Object.values(snapshot.groups)) {
      const entries = new Map<string, GroupModel>();
      for (const [code, pricing] of Object.entries(g.models)) {
        const model = this.models.get(code);
        if (model) entries.set(code, { model, prices: toPrices(pricing) });
      }
      this.groups.set(g.name, { ...g, entries });
    }
  }
}

export function toPrices(p: MicroPricing): Prices {
  const big = (v?: string) => (v === undefined ? 0n : BigInt(v));
  const table = (t?: Record<string, string>) => new Map(Object.entries(t ?? {}).map(([k, v]) => [k, BigInt(v)]));
  return {
    inputPerMillion: big(p.inputPerMillion),
    cachedInputPerMillion: big(p.cachedInputPerMillion ?? p.inputPerMillion),
    outputPerMillion: big(p.outputPerMillion),
    perImage: table(p.perImage),
    perSecond: table(p.perSecond),
    audioPerSecond: big(p.audioPerSecond),
  };
}
