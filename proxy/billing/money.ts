/** A BIGINT column as the driver returns it (string, number or bigint; NULL is 0). */
export const big = (v: unknown): bigint => (v === null || v === undefined ? 0n : BigInt(v as string | number | bigint));
