import { ServerResponse, type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders } from 'node:http';

const REQUEST_ID = 'x-request-id';

/**
 * The API's responses: the request id rides on the head as it is written, instead of being set
 * with setHeader when the request arrives. Node writes a head given whole to writeHead() straight
 * out; one header set before sends every header of it through setHeader and its checks again (a
 * streamed answer's head took 2.7-4.8 µs that way against 1.4-2.5 given whole: bench/RESULTS.md).
 */
export class GatewayResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  requestId: string | undefined;

  override writeHead(
    statusCode: number,
    reason?: string | OutgoingHttpHeaders | OutgoingHttpHeader[],
    headers?: OutgoingHttpHeaders | OutgoingHttpHeader[],
  ): this {
    const id = this.requestId;
    if (id === undefined) return super.writeHead(statusCode, reason as string, headers);
    let message: string | undefined;
    if (typeof reason === 'string') message = reason;
    else headers ??= reason; // as Node reads writeHead(status, headers) and writeHead(status, undefined, headers)
    if (headers === undefined) {
      // The head is what setHeader() collected (an implicit head, or writeHead(status) alone).
      if (!this.hasHeader(REQUEST_ID)) this.setHeader(REQUEST_ID, id);
    } else if (Array.isArray(headers)) {
      headers = Array.isArray(headers[0]) ? [...headers, [REQUEST_ID, id]] : [...headers, REQUEST_ID, id];
    } else if (headers[REQUEST_ID] === undefined) {
      headers = { ...headers, [REQUEST_ID]: id };
    }
    return message === undefined ? super.writeHead(statusCode, headers) : super.writeHead(statusCode, message, headers);
  }
}
