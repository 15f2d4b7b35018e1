import { z } from 'zod';
import { ApiKey } from './apikey.js';
import { Group } from './group.js';
import { ModelRoute } from './modelroute.js';

export * from './common.js';
export * from './modelroute.js';
export * from './group.js';
export * from './apikey.js';

export const Resource = z.discriminatedUnion('kind', [ModelRoute, Group, ApiKey]);
export type Resource = z.infer<typeof Resource>;
export const KINDS = ['ModelRoute', 'Group', 'ApiKey'] as const;
export type Kind = (typeof KINDS)[number];

/** Kind -> schema, plural and short names: what the CRD generator and the operator share. */
export const KIND_INFO = {
  ModelRoute: { schema: ModelRoute, plural: 'modelroutes', singular: 'modelroute', shortNames: ['mr'] },
  Group: { schema: Group, plural: 'groups', singular: 'group', shortNames: ['tgg'] },
  ApiKey: { schema: ApiKey, plural: 'apikeys', singular: 'apikey', shortNames: ['ak'] },
} as const;
