import { falRoutes } from './fal.js';
import type { SimRoute } from './server.js';

/** Image and video providers beyond OpenAI and Replicate: fal.ai's queue. */
export const mediaProviderRoutes: SimRoute[] = [...falRoutes];
