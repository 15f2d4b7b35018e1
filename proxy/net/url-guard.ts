import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { networkInterfaces } from 'node:os';

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

/**
 * The IANA special-purpose registries (IPv4 and IPv6), plus multicast and metadata addresses:
 * nothing here is a public service a client could mean. Addresses that embed an IPv4 address
 * (IPv4-mapped and -compatible, 6to4, Teredo) are checked by the address they embed as well.
 */
const RESTRICTED: [string, number, 'ipv4' | 'ipv6', string][] = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared (CGNAT) or metadata'], // 100.100.100.200 is Alibaba's metadata service
  ['169.254.0.0', 16, 'ipv4', 'link-local or metadata'], // 169.254.169.254: AWS, GCP, Azure, OpenStack
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'IETF protocol assignment or metadata'], // 192.0.0.192: Oracle Cloud
  ['192.0.2.0', 24, 'ipv4', 'documentation'],
  ['192.31.196.0', 24, 'ipv4', 'AS112'],
  ['192.52.193.0', 24, 'ipv4', 'AMT'],
  ['192.88.99.0', 24, 'ipv4', '6to4 relay'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['192.175.48.0', 24, 'ipv4', 'AS112'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['198.51.100.0', 24, 'ipv4', 'documentation'],
  ['203.0.113.0', 24, 'ipv4', 'documentation'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved or broadcast'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['64:ff9b::', 96, 'ipv6', 'NAT64'], // may translate to any IPv4 address, private ones included
  ['64:ff9b:1::', 48, 'ipv6', 'local NAT64'],
  ['100::', 64, 'ipv6', 'discard-only'],
  ['2001::', 32, 'ipv6', 'Teredo'],
  ['2001:2::', 48, 'ipv6', 'benchmarking'],
  ['2001:10::', 28, 'ipv6', 'ORCHID'],
  ['2001:db8::', 32, 'ipv6', 'documentation'],
  ['3fff::', 20, 'ipv6', 'documentation'],
  ['5f00::', 16, 'ipv6', 'segment routing'],
  ['fc00::', 7, 'ipv6', 'private (unique local) or metadata'], // fd00:ec2::254: AWS over IPv6
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];
const RESTRICTED_LIST = RESTRICTED.map(([net, prefix, family, label]) => {
  const b = new BlockList();
  b.addSubnet(net, prefix, family);
  return { b, label };
});

/** The IPv4 addresses an IPv6 address carries: mapped or compatible (::ffff:a.b.c.d, ::a.b.c.d), 6to4 (2002:AABB:CCDD::), Teredo (server and client). */
export function embeddedIPv4(address: string): string[] {
  const b = ipv6Bytes(address);
  if (!b) return [];
  const v4 = (o: number, xor = 0) => [b[o]! ^ xor, b[o + 1]! ^ xor, b[o + 2]! ^ xor, b[o + 3]! ^ xor].join('.');
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zero(0, 10) && ((b[10] === 0xff && b[11] === 0xff) || (b[10] === 0 && b[11] === 0 && !zero(12, 16)))) return [v4(12)];
  if (b[0] === 0x20 && b[1] === 0x02) return [v4(2)];
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0) return [v4(4), v4(12, 0xff)];
  return [];
}

/** The 16 bytes of an IPv6 address (dotted IPv4 tail allowed), or undefined. */
function ipv6Bytes(address: string): number[] | undefined {
  if (isIP(address) !== 6) return undefined;
  let s = address.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const p = dotted[1]!.split('.').map(Number);
    s = `${s.slice(0, -dotted[1]!.length)}${((p[0]! << 8) | p[1]!).toString(16)}:${((p[2]! << 8) | p[3]!).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  if (groups.length !== 8) return undefined;
  return groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

/** The host's own addresses: a client must not make the gateway call itself on another interface. */
let own: { at: number; set: Set<string> } | undefined;
function ownAddresses(): Set<string> {
  if (!own || performance.now() - own.at > 60_000) {
    const set = new Set<string>();
    for (const list of Object.values(networkInterfaces())) for (const i of list ?? []) set.add(i.address.replace(/%.*$/, '').toLowerCase());
    own = { at: performance.now(), set };
  }
  return own.set;
}

/** Why an address is refused under the policy, or undefined when it is allowed. */
export function refusal(address: string, policy: UrlPolicy): string | undefined {
  if (policy.allowPrivate) return undefined;
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  if (LOOPBACK.check(address, family)) return policy.allowLoopback ? undefined : 'loopback';
  for (const { b, label } of RESTRICTED_LIST) if (b.check(address, family)) return label;
  for (const inner of family === 'ipv6' ? embeddedIPv4(address) : []) {
    const why = refusal(inner, policy);
    if (why) return `${why} (embedded in ${address})`;
  }
  if (ownAddresses().has(address.toLowerCase())) return policy.allowLoopback ? undefined : "this host's own";
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
