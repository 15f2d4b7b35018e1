/** A numeric benchmark setting from the environment (BENCH_*), or its default. */
export const envNumber = (name: string, dflt: number): number => (process.env[name] ? Number(process.env[name]) : dflt);
