import { describe, expect, it } from 'vitest';
import type { CompiledBackend } from '../../../api/snapshot/index.js';
import { authOf, dialectOf, modelPath } from './endpoint.js';
import { nearestRatio } from './images.js';
import { veoDuration } from './veo.js';

const backend = (baseURL: string, model = 'veo-3.1-generate-preview') => ({ provider: 'gemini', baseURL, model, timeoutMs: 1000 }) as CompiledBackend;

describe('Google media endpoints', () => {
  it('tell the Gemini API from Vertex AI by the baseURL and build the method path of each', async () => {
    const ai = backend('https://generativelanguage.googleapis.com');
    const aiVersioned = backend('https://generativelanguage.googleapis.com/v1beta/');
    const vx = backend('https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1');
    const vxPublisher = backend('https://example.test/v1/projects/p/locations/global/publishers/google');
    expect([ai, aiVersioned, vx, vxPublisher].map(dialectOf)).toEqual(['gemini', 'gemini', 'vertex', 'vertex']);
    expect(modelPath(ai, 'predictLongRunning')).toBe('/v1beta/models/veo-3.1-generate-preview:predictLongRunning');
    expect(modelPath(aiVersioned, 'predictLongRunning')).toBe('/models/veo-3.1-generate-preview:predictLongRunning');
    expect(modelPath(vx, 'fetchPredictOperation')).toBe('/publishers/google/models/veo-3.1-generate-preview:fetchPredictOperation');
    expect(modelPath(vxPublisher, 'generateContent')).toBe('/models/veo-3.1-generate-preview:generateContent');
    expect(await authOf({ backend: ai, credential: 'k' })).toEqual({ 'x-goog-api-key': 'k' });
    expect(await authOf({ backend: vx, credential: 't' })).toEqual({ authorization: 'Bearer t' });
    expect(await authOf({ backend: vx, credential: undefined })).toEqual({});
  });

  it('pick the nearest ratio Gemini takes and the longest Veo duration not above the asked one', () => {
    expect(['1:1', '16:9', '12:5', '2:1', '1:2', '7:5'].map((r) => nearestRatio(r))).toEqual(['1:1', '16:9', '21:9', '16:9', '9:16', '4:3']);
    expect([4, 5, 7, 8, 12].map((d) => veoDuration('veo-3.0-generate-001', d))).toEqual([4, 4, 6, 8, 8]);
    expect([4, 6, 9].map((d) => veoDuration('veo-2.0-generate-001', d))).toEqual([5, 6, 8]);
  });
});
