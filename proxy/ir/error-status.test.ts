import { describe, expect, it } from 'vitest';
import { errorStatus } from './error-status.js';

describe('errorStatus', () => {
  it("gives each wire's in-stream error names the status of their class", () => {
    // OpenAI, Anthropic, Gemini (google.rpc codes), Bedrock (exception types)
    expect(['rate_limit_exceeded', 'rate_limit_error', 'RESOURCE_EXHAUSTED', 'throttlingException'].map(errorStatus)).toEqual([429, 429, 429, 429]);
    expect(['overloaded_error', 'UNAVAILABLE', 'serviceUnavailableException'].map(errorStatus)).toEqual([529, 529, 529]);
    expect(['invalid_request_error', 'INVALID_ARGUMENT', 'validationException'].map(errorStatus)).toEqual([400, 400, 400]);
    expect(['server_error', 'api_error', 'INTERNAL', 'internalServerException', 'modelStreamErrorException', undefined].map(errorStatus)).toEqual([
      500, 500, 500, 500, 500, 500,
    ]);
    expect(['DEADLINE_EXCEEDED', 'PERMISSION_DENIED', 'accessDeniedException', 'not_found_error'].map(errorStatus)).toEqual([504, 403, 403, 404]);
  });
});
