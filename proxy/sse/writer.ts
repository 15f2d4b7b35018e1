/**
 * Encodes Server-Sent Events. Data containing line breaks is split over several data: lines, so
 * any string round-trips through a conforming parser.
 */
const BREAK = /\r\n|\r|\n/;

export function encodeEvent(data: string, event?: string, id?: string): string {
  let out = '';
  if (event) out += `event: ${event}\n`;
  if (id !== undefined) out += `id: ${id}\n`;
  if (data.indexOf('\n') === -1 && data.indexOf('\r') === -1) return `${out}data: ${data}\n\n`;
  for (const line of data.split(BREAK)) out += `data: ${line}\n`;
  return `${out}\n`;
}

/** A JSON payload as one event (JSON.stringify never emits raw line breaks). */
export function encodeJsonEvent(value: unknown, event?: string): string {
  return event ? `event: ${event}\ndata: ${JSON.stringify(value)}\n\n` : `data: ${JSON.stringify(value)}\n\n`;
}

/** A comment line: keeps idle connections alive through proxies; ignored by clients. */
export function encodeComment(text = ''): string {
  return `: ${text.replace(/[\r\n]+/g, ' ')}\n\n`;
}

export const DONE = 'data: [DONE]\n\n';
