/**
 * The HTTP status of the class of error an upstream named inside its stream, whatever its wire's
 * vocabulary: OpenAI's `server_error`, Anthropic's `overloaded_error`, Gemini's `UNAVAILABLE`,
 * Bedrock's `throttlingException`. A stream's error event carries no status of its own, and a
 * client of another protocol knows only its own protocol's names: each client encoder names the
 * class in its vocabulary from this status, as it names a translated error answer's.
 */
const CLASSES: [RegExp, number][] = [
  [/rate.?limit|throttl|resource_exhausted|too.?many|quota/i, 429],
  [/overload|unavailable|capacity/i, 529],
  [/invalid|validation|failed_precondition|out_of_range/i, 400],
  [/authenticat/i, 401],
  [/permission|access.?denied/i, 403],
  [/not.?found/i, 404],
  [/too.?large/i, 413],
  [/deadline|timeout|timed.?out/i, 504],
];

export function errorStatus(type: string | undefined): number {
  if (type) for (const [re, status] of CLASSES) if (re.test(type)) return status;
  return 500;
}
