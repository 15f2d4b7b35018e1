import type { LookupAddress } from 'node:dns';
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

  it('checks what it can before DNS: scheme, credentials, literal addresses, localhost', () => {
    expect(checkUrlSyntax('https://hooks.example.com/x?y=1', STRICT)).toBeUndefined();
    expect(checkUrlSyntax('ftp://hooks.example.com/', STRICT)).toMatch(/http or https/);
    expect(checkUrlSyntax('http://[::1]:8080/', STRICT)).toMatch(/loopback/);
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
