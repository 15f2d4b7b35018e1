export { SseParser, type SseListener, type SseParserOptions } from './parser.js';
export { DONE, encodeComment, encodeEvent, encodeJsonEvent } from './writer.js';
