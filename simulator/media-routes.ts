import { fileRoutes } from './files.js';
import { openaiImageRoutes } from './openai-images.js';
import { replicateRoutes } from './replicate.js';
import type { SimRoute } from './server.js';

/** Image generation (OpenAI Images), Replicate-style predictions and the files they hand out. */
export const mediaRoutes: SimRoute[] = [...openaiImageRoutes, ...replicateRoutes, ...fileRoutes];
