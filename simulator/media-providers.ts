import { arkRoutes } from './ark.js';
import { falRoutes } from './fal.js';
import { geminiMediaRoutes } from './gemini-media.js';
import type { SimRoute } from './server.js';

/** Image and video providers beyond OpenAI and Replicate: fal.ai's queue, Gemini images and Veo, ByteDance ModelArk. */
export const mediaProviderRoutes: SimRoute[] = [...falRoutes, ...geminiMediaRoutes, ...arkRoutes];
