import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * URL safety for requests the gateway makes on a client's behalf (webhooks, media it downloads):
 * the address actually connected to must not be loopback, private, link-local or a cloud
 * metadata endpoint unless configuration allows it. The check runs inside the socket's DNS
 * lookup, so the address checked is the address used (no window for DNS rebinding); literal IPs
 * never reach a lookup and are checked before the request.
 */
export interface UrlPolicy {
  /** Loopback addresses (127.0.0.0/8, ::1, localhost) are allowed: the quickstart and tests. */
  allowLoopback: boolean;
  /** Everything is allowed, private and metadata addresses included: tests only. */
  allowPrivate: boolean;
}

export class UrlRefusedError extends Error {
  readonly code = 'url_refused';
  constructor(message: string) {
    super(message);
    this.name = 'UrlRefusedError';
  }
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Not routable to a public service, or pointing inside the provider's network. */
const RESTRICTED: [string, number, 'ipv4' | 'ipv6', string][] = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared (CGNAT) or metadata'], // 100.100.100.200 is Alibaba's metadata service
  ['169.254.0.0', 16, 'ipv4', 'link-local or metadata'], // 169.254.169.254: AWS, GCP, Azure, OpenStack
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'IETF protocol assignment or metadata'], // 192.0.0.192: Oracle Cloud
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved or broadcast'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['fc00::', 7, 'ipv6', 'private (unique local) or metadata'], // fd00:ec2::254: AWS over IPv6
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
  ['64:ff9b::', 96, 'ipv6', 'NAT64'], // may translate to any IPv4 address, private ones included
];
const RESTRICTED_LIST = RESTRICTED.map(([net, prefix, family, label]) => {
  const b = new BlockList();
  b.addSubnet(net, prefix, family);
  return { b, label };
});

/** Why an address is refused under the policy, or undefined when it is allowed. IPv4-mapped IPv6 is checked as IPv4. */
export function refusal(address: string, policy: UrlPolicy): string | undefined {
  if (policy.allowPrivate) return undefined;
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  if (LOOPBACK.check(address, family)) return policy.allowLoopback ? undefined : 'loopback';
  for (const { b, label } of RESTRICTED_LIST) if (b.check(address, family)) return label;
  return undefined;
}

/**
 * What can be decided without DNS, at submission: the scheme, and a host that is a literal
 * address or a localhost name. Returns the reason for a 400, or undefined.
 */
export function checkUrlSyntax(raw: string, policy: UrlPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a valid URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  if (url.username || url.password) return 'must not carry credentials';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    const why = refusal(host, policy);
    return why ? `points at a ${why} address (${host}), which this gateway does not call` : undefined;
  }
  if ((host === 'localhost' || host.endsWith('.localhost')) && refusal('127.0.0.1', policy)) {
    return 'points at localhost, which this gateway does not call';
  }
  return undefined;
}

/** Throws UrlRefusedError for a URL whose scheme or literal address the policy refuses. */
export function assertUrlAllowed(raw: string, policy: UrlPolicy): URL {
  const why = checkUrlSyntax(raw, policy);
  if (why) throw new UrlRefusedError(`URL ${why}`);
  return new URL(raw);
}

/** How names are resolved: every address of the name (the system resolver by default). */
export type Resolver = (hostname: string, options: object, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;
const systemResolver: Resolver = (hostname, options, callback) => dnsLookup(hostname, { ...options, all: true }, callback);

/**
 * A socket lookup that resolves every address of the name and refuses the connection when any
 * of them is refused (a name that mixes public and private answers is not trusted).
 */
export function guardedLookup(policy: UrlPolicy, resolve: Resolver = systemResolver): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, options, (err, addresses) => {
      if (err) return callback(err, '', 0);
      for (const a of addresses) {
        const why = refusal(a.address, policy);
        if (why) return callback(new UrlRefusedError(`${hostname} resolves to ${a.address}, a ${why} address, which this gateway does not call`), '', 0);
      }
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no addresses`), { code: 'ENOTFOUND' }), '', 0);
      if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** The refusal at the root of an undici error, if that is what it was. */
export function refusedCause(err: unknown): UrlRefusedError | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && e; i++) {
    if (e instanceof UrlRefusedError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
