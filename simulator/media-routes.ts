import { fileRoutes } from './files.js';
import { openaiImageRoutes } from './openai-images.js';
import { openaiVideoRoutes } from './openai-videos.js';
import { replicateRoutes } from './replicate.js';
import type { SimRoute } from './server.js';

/** Image and video generation (OpenAI Images and Videos), Replicate-style predictions and the files they hand out. */
export const mediaRoutes: SimRoute[] = [...openaiImageRoutes, ...openaiVideoRoutes, ...replicateRoutes, ...fileRoutes];
