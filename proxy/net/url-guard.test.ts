import type { LookupAddress } from 'node:dns';
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { checkUrlSyntax, guardedLookup, refusal, UrlRefusedError, type Resolver, type UrlPolicy } from './url-guard.js';

const STRICT: UrlPolicy = { allowLoopback: false, allowPrivate: false };
const LOOPBACK: UrlPolicy = { allowLoopback: true, allowPrivate: false };

function lookup(policy: UrlPolicy, host: string, resolve?: Resolver): Promise<LookupAddress[]> {
  return new Promise((res, rej) =>
    guardedLookup(policy, resolve)(host, { all: true }, ((err: Error | null, addresses: LookupAddress[]) => (err ? rej(err) : res(addresses))) as never),
  );
}

describe('URL guard', () => {
  it('refuses loopback, private, link-local and metadata addresses, IPv4-mapped ones included', () => {
    const refused = [
      '127.0.0.1',
      '127.9.9.9',
      '::1',
      '::ffff:127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.100.100.200',
      '192.0.0.192',
      'fd00:ec2::254',
      'fe80::1',
      '0.0.0.0',
      '::',
      '::ffff:10.0.0.1',
    ];
    for (const a of refused) expect(refusal(a, STRICT), a).toBeDefined();
    for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '172.32.0.1']) expect(refusal(a, STRICT), a).toBeUndefined();
    expect(refusal('127.0.0.1', LOOPBACK)).toBeUndefined();
    expect(refusal('::1', LOOPBACK)).toBeUndefined();
    expect(refusal('10.0.0.1', LOOPBACK)).toBe('private');
    expect(refusal('169.254.169.254', { allowLoopback: true, allowPrivate: true })).toBeUndefined();
  });

  it('refuses every IANA special-purpose range, and addresses that embed a refused IPv4 address (table)', () => {
    const table: [string, RegExp][] = [
      ['192.0.2.2', /documentation/],
      ['198.51.100.7', /documentation/],
      ['203.0.113.9', /documentation/],
      ['198.19.0.1', /benchmarking/],
      ['192.88.99.1', /6to4 relay/],
      ['192.31.196.1', /AS112/],
      ['192.175.48.1', /AS112/],
      ['192.52.193.1', /AMT/],
      ['255.255.255.255', /broadcast/],
      ['239.1.2.3', /multicast/],
      ['::7f00:1', /loopback \(embedded in ::7f00:1\)/], // IPv4-compatible ::127.0.0.1
      ['::127.0.0.1', /loopback/],
      ['::ffff:169.254.169.254', /link-local or metadata/],
      ['::ffff:a9fe:a9fe', /link-local or metadata/],
      ['2002:7f00:1::', /loopback \(embedded/], // 6to4 of 127.0.0.1
      ['2002:a00:1::1', /private \(embedded/], // 6to4 of 10.0.0.1
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /Teredo/],
      ['64:ff9b::a00:1', /NAT64/],
      ['64:ff9b:1::1', /local NAT64/],
      ['100::1', /discard-only/],
      ['2001:2::1', /benchmarking/],
      ['2001:db8::1', /documentation/],
      ['3fff::1', /documentation/],
      ['2001:10::1', /ORCHID/],
      ['5f00::1', /segment routing/],
      ['fec0::1', /site-local/],
      ['ff02::1', /multicast/],
    ];
    for (const [a, why] of table) expect(refusal(a, STRICT), a).toMatch(why);
    // Public addresses, and 6to4 of a public one, stay allowed.
    for (const a of ['1.1.1.1', '2002:5db8:d822::1', '2a00:1450:4001::200e', '::ffff:8.8.8.8']) expect(refusal(a, STRICT), a).toBeUndefined();
  });

  it("refuses the host's own interface addresses unless loopback is allowed", () => {
    const mine = Object.values(networkInterfaces())
      .flat()
      .map((i) => i?.address)
      .filter((a): a is string => !!a && !a.startsWith('127.') && a !== '::1' && !a.startsWith('fe80'));
    for (const a of mine) {
      expect(refusal(a, STRICT), a).toBeDefined();
      expect(refusal(a, LOOPBACK) ?? '', a).not.toMatch(/own/);
    }
  });

  it('checks what it can before DNS: scheme, credentials, literal addresses, localhost', () => {
    expect(checkUrlSyntax('https://hooks.example.com/x?y=1', STRICT)).toBeUndefined();
    expect(checkUrlSyntax('ftp://hooks.example.com/', STRICT)).toMatch(/http or https/);
    expect(checkUrlSyntax('http://[::1]:8080/', STRICT)).toMatch(/loopback/);
    expect(checkUrlSyntax('http://[::7f00:1]/', STRICT)).toMatch(/loopback/);
    expect(checkUrlSyntax('https://192.0.2.2/hook', STRICT)).toMatch(/documentation/);
    expect(checkUrlSyntax('http://0x7f000001/', STRICT)).toMatch(/loopback/); // WHATWG URL normalises it to 127.0.0.1
    expect(checkUrlSyntax('http://api.localhost/', STRICT)).toMatch(/localhost/);
    expect(checkUrlSyntax('http://localhost:1/', LOOPBACK)).toBeUndefined();
  });

  it('checks every address a name resolves to, at connect time', async () => {
    await expect(lookup(STRICT, 'localhost')).rejects.toBeInstanceOf(UrlRefusedError);
    expect((await lookup(LOOPBACK, 'localhost'))[0]!.address).toMatch(/^(127\.|::1)/);
    // A name that answers a public and a private address is not trusted.
    const mixed: Resolver = (_h, _o, cb) =>
      cb(null, [
        { address: '93.184.216.34', family: 4 },
        { address: '10.0.0.5', family: 4 },
      ]);
    await expect(lookup(STRICT, 'rebind.example', mixed)).rejects.toThrow(/10\.0\.0\.5, a private address/);
    const fine: Resolver = (_h, _o, cb) => cb(null, [{ address: '93.184.216.34', family: 4 }]);
    expect(await lookup(STRICT, 'ok.example', fine)).toEqual([{ address: '93.184.216.34', family: 4 }]);
  });
});
