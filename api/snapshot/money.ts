/** Money is integer micro-credits (1 credit = 1,000,000) held in bigint; decimal strings at the edges. */
export const MICRO = 1_000_000n;

/** "10.5" -> 10_500_000n. The caller has validated the string (api/v1alpha1 Decimal). */
export function toMicro(decimal: string): bigint {
  const m = /^(\d+)(?:\.(\d{1,6}))?$/.exec(decimal.trim());
  if (!m) throw new RangeError(`not a decimal credit amount: ${JSON.stringify(decimal)}`);
  const whole = BigInt(m[1]!);
  const frac = BigInt((m[2] ?? '').padEnd(6, '0'));
  return whole * MICRO + frac;
}

/** 10_500_000n -> "10.500000": always six places so clients can compare strings of one shape. */
export function fromMicro(micro: bigint): string {
  const neg = micro < 0n;
  const abs = neg ? -micro : micro;
  const whole = abs / MICRO;
  const frac = (abs % MICRO).toString().padStart(6, '0');
  return `${neg ? '-' : ''}${whole}.${frac}`;
}

/** a * b / MICRO, rounded half up: a price (micro) times a multiplier (micro). */
export function mulMicro(a: bigint, b: bigint): bigint {
  return (a * b + MICRO / 2n) / MICRO;
}

/** Division rounding up: a charge never rounds down to free. */
export function divCeil(a: bigint, b: bigint): bigint {
  return a <= 0n ? 0n : (a + b - 1n) / b;
}
