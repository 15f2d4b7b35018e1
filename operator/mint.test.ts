import { describe, expect, it } from 'vitest';
import { mintApiKey, mintedSecret, ownedBy } from './mint.js';

describe('key minting', () => {
  it('mints sk-service- + 32 random bytes in base64url, different every time', () => {
    const keys = new Set(Array.from({ length: 100 }, () => mintApiKey()));
    expect(keys.size).toBe(100);
    for (const k of keys) {
      expect(k).toMatch(/^sk-service-[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(k.slice('sk-service-'.length), 'base64url')).toHaveLength(32);
    }
  });

  it('puts the key in a Secret owned by the ApiKey (by uid), which only that ApiKey owns', () => {
    const apiKey = { metadata: { name: 'team-a', namespace: 'ns', uid: 'uid-1' } };
    const s = mintedSecret(apiKey, 'ns', 'sk-service-x');
    expect(s.metadata).toMatchObject({
      name: 'team-a-key',
      namespace: 'ns',
      ownerReferences: [{ kind: 'ApiKey', name: 'team-a', uid: 'uid-1', controller: true, blockOwnerDeletion: true }],
    });
    expect(Buffer.from(s.data!.apiKey!, 'base64').toString()).toBe('sk-service-x');
    const secret = { metadata: { name: s.metadata!.name!, ownerReferences: s.metadata!.ownerReferences! } };
    expect(ownedBy(secret, apiKey)).toBe(true);
    // A re-created ApiKey of the same name has a new uid and does not own the old Secret.
    expect(ownedBy(secret, { metadata: { name: 'team-a', uid: 'uid-2' } })).toBe(false);
  });
});
