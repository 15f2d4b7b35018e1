/** Reading wire JSON of unknown shape, for the codecs on both sides of the IR. */
export type Json = Record<string, unknown>;

export const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** An SSE event's data as a JSON object, or undefined when it is not one (a keep-alive, [DONE], a stray line). */
export function eventObject(data: string): Json | undefined {
  try {
    const v = JSON.parse(data) as unknown;
    return isObj(v) ? v : undefined;
  } catch {
    return undefined;
  }
}
