import { z } from 'zod';
import { Decimal, Name, ObjectMeta, cel, statusWith } from './common.js';

export const KEY_PREFIX = 'sk-service-';

export const ApiKeySpec = z
  .strictObject({
    group: Name.describe('The Group whose models, prices and limits the key gets (Group names are one space across the watched namespaces).'),
    account: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[A-Za-z0-9_.:-]+$/, 'must be letters, digits, _ . : or -')
      // Credits already spent through the key stay with the account they came from.
      .meta({
        description: "The account whose credits pay for the key's calls. Immutable: make a new ApiKey for another account.",
        ...cel({ rule: 'self == oldSelf', message: 'account is immutable: make a new ApiKey for another account' }),
      }),
    keyHash: z
      .string()
      .regex(/^sha256:[0-9a-f]{64}$/, 'must be sha256:<64 lowercase hex>')
      .optional()
      .describe(
        'sha256:<hex> of the whole key (`tollgate keys create` prints it). Absent in a cluster: the operator mints a key ' +
          'and writes it to the Secret named in status.secretName.',
      ),
    revoked: z.boolean().optional().describe('true: the key is refused (401) from the moment the proxies receive the change.'),
    expiresAt: z.iso
      .datetime({ offset: true, error: 'must be an RFC 3339 timestamp' })
      .optional()
      .describe('RFC 3339 time from which the key is refused (401).'),
    spendLimit: Decimal.optional().describe(
      'Credits the key may ever spend (charged calls, open task holds and requests in flight); past it, 402 spend_limit_reached although the account has credits.',
    ),
  })
  .describe('One API key: its group, the account that pays, and its state. Only its sha256 is ever stored.');
export type ApiKeySpec = z.infer<typeof ApiKeySpec>;

export const ApiKeyStatus = statusWith({
  secretName: z.string().optional().describe('The Secret (same namespace, <name>-key) holding the key the operator minted, under the data key apiKey.'),
});

export const ApiKey = z.strictObject({
  apiVersion: z.literal('tollgate.dev/v1alpha1'),
  kind: z.literal('ApiKey'),
  metadata: ObjectMeta,
  spec: ApiKeySpec,
  status: ApiKeyStatus.optional(),
});
export type ApiKey = z.infer<typeof ApiKey>;
