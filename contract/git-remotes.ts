/**
 * What a git remote URL may be: the rules the envelope (repo.url) and the stage pin (pin.repoUrl)
 * share. Pure: no I/O, no DNS.
 *
 * Every check parses the URL with the WHATWG URL parser (the one Node's HTTP client dials with)
 * and works on the parsed parts, never on the text: `HTTP://user:token@host` has a user name
 * whatever the spelling, and `http://2130706433/` is 127.0.0.1. A URL that passes is carried in its
 * normalised form (`URL.href`), so what was checked is exactly what is stored and dialled.
 */
import type { BlockList } from 'node:net';
import * as z from 'zod/mini';
import './zod-english';

export const MAX_REPO_URL_LENGTH = 2048;

/** Why a repository URL is refused, or undefined when it is acceptable. Never echoes credentials. */
export function repoUrlProblem(text: string): string | undefined {
  if (text.length > MAX_REPO_URL_LENGTH) return `must be at most ${MAX_REPO_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an http(s) URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `must be an http(s) URL, not ${url.protocol}`;
  if (url.username !== '' || url.password !== '') {
    return 'must not carry credentials (user:token@): the git credentials secret provides them, and a URL is stored in the queue, the DLQ and the ledger';
  }
  if (url.search !== '' || url.hash !== '') return 'must not have a query or a fragment';
  return undefined;
}

/** The form a repository URL is stored and compared in. Only call it on a URL repoUrlProblem accepts. */
export function normalizeRepoUrl(text: string): string {
  return new URL(text).href;
}

/**
 * What makes two repository URLs one repository, for rules that must not be fooled by a spelling
 * (one workspace per repository branch: src/core/ledger.ts branchBindingKey): letter case, a
 * trailing "/" and a trailing ".git" do not count. GitHub serves `Acme/App`, `acme/app.git` and
 * `acme/app/` as one repository, and so does any host on a case-insensitive file system. Broader
 * than what the hosts agree on, on purpose: two repositories that differ only so are treated as one.
 */
export function repositoryIdentity(url: string): string {
  return normalizeRepoUrl(url)
    .toLowerCase()
    .replace(/\/+$/, '')
    .replace(/\.git$/, '')
    .replace(/\/+$/, '');
}

/** A repository URL on the wire (apply_patch's repo.url, a stage message's pin.repoUrl), normalised. */
export const repoUrlSchema = z.pipe(
  z.string({ error: 'must be an http(s) URL' }).check(
    z.superRefine((text, ctx) => {
      const problem = repoUrlProblem(text);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
    z.describe(
      `An http(s) URL of at most ${MAX_REPO_URL_LENGTH} characters, without credentials (user:token@), query or fragment; carried normalised.`,
    ),
  ),
  z.transform(normalizeRepoUrl),
);

/**
 * Which git hosts the platform may dial: the allow-list of the deployment's configuration
 * (`gitHosts`), and whether loopback, link-local and metadata addresses are acceptable (only for
 * the local platform, whose own git server is on loopback).
 */
export interface GitHostPolicy {
  /** `name` (any port) or `name:port`, as gitHostEntryProblem accepts them. Empty: every host is refused. */
  readonly hosts: readonly string[];
  readonly localAddresses: boolean;
}

let neverDialled: { readonly addresses: BlockList; readonly isIP: (input: string) => number } | undefined;
/**
 * Addresses a worker on AWS must never dial, whatever the allow-list says: loopback, "this
 * network" (0.0.0.0 reaches loopback on Linux), link-local (169.254.169.254 is the instance
 * metadata service, 169.254.170.2 the container credentials endpoint) and EC2's IPv6 metadata
 * address. IPv4-mapped IPv6 forms (::ffff:127.0.0.1) match the IPv4 rules.
 *
 * Built at the first check, with node:net required then: every bundle and the CLI import this
 * module, and node:net brings Node's stream stack, which a function that never checks an address
 * (or an invocation that has not yet) need not load.
 */
function neverDialledAddresses(): NonNullable<typeof neverDialled> {
  if (neverDialled) return neverDialled;
  const net: typeof import('node:net') = require('node:net');
  const addresses = new net.BlockList();
  addresses.addSubnet('127.0.0.0', 8, 'ipv4');
  addresses.addSubnet('0.0.0.0', 8, 'ipv4');
  addresses.addSubnet('169.254.0.0', 16, 'ipv4');
  addresses.addAddress('::', 'ipv6');
  addresses.addAddress('::1', 'ipv6');
  addresses.addSubnet('fe80::', 10, 'ipv6');
  addresses.addAddress('fd00:ec2::254', 'ipv6');
  neverDialled = { addresses, isIP: net.isIP };
  return neverDialled;
}

/** Names that resolve to loopback or a metadata service by convention, whatever DNS says. */
const NEVER_DIALLED_NAME = /^(?:(?:.+\.)?localhost|metadata|metadata\.google\.internal|instance-data(?:\..+)?)\.?$/;

/** Why a URL's host (its WHATWG `hostname`) or a resolved address must never be dialled on AWS, or undefined. */
export function localAddressProblem(hostname: string): string | undefined {
  const address = hostname.replace(/^\[(.*)\]$/, '$1');
  const { addresses, isIP } = neverDialledAddresses();
  const family = isIP(address);
  if (family !== 0 && addresses.check(address, family === 4 ? 'ipv4' : 'ipv6'))
    return `${hostname} is a loopback, link-local or metadata address`;
  if (family === 0 && NEVER_DIALLED_NAME.test(hostname)) return `${hostname} names loopback or a metadata service`;
  return undefined;
}

/** The allow-list as the environment carries it (ENV.gitHosts: comma-separated); unset or empty: none. */
export function gitHostList(text: string | undefined): string[] {
  return (text ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

/** The policy on AWS: the configured hosts, and never a loopback, link-local or metadata address. */
export function awsGitHostPolicy(text: string | undefined): GitHostPolicy {
  return { hosts: gitHostList(text), localAddresses: false };
}

const DEFAULT_PORTS: Readonly<Record<string, string>> = { 'http:': '80', 'https:': '443' };

/** An allow-list entry split and normalised as the URL parser would (lower case, punycode, IP forms). */
function parseHostEntry(entry: string): { hostname: string; port?: string } | undefined {
  const match = /^(.+?)(?::(\d{1,5}))?$/.exec(entry);
  if (!match?.[1] || /[/?#@\s]/.test(entry)) return undefined;
  try {
    const hostname = new URL(`http://${match[1]}/`).hostname;
    return match[2] === undefined ? { hostname } : { hostname, port: String(Number(match[2])) };
  } catch {
    return undefined;
  }
}

/**
 * Why an allow-list entry is refused, or undefined. `localAddresses` false (AWS): an entry that is
 * a loopback, link-local or metadata address is refused too, since it could never be dialled.
 */
export function gitHostEntryProblem(entry: string, localAddresses: boolean): string | undefined {
  const parsed = parseHostEntry(entry);
  if (!parsed) return `${JSON.stringify(entry)} is not a host name or name:port (no scheme, path or credentials)`;
  if (!localAddresses) {
    const problem = localAddressProblem(parsed.hostname);
    if (problem) return `${JSON.stringify(entry)}: ${problem}, never dialled on AWS`;
  }
  return undefined;
}

/**
 * Why the platform may not dial this repository URL under the policy, or undefined. Only call it
 * on a URL repoUrlProblem accepts. Works on the parsed host, so `HTTP://GitHub.COM:443/` is
 * github.com and `http://2130706433/` is 127.0.0.1. Names are not resolved here (pure).
 */
export function gitHostProblem(repoUrl: string, policy: GitHostPolicy): string | undefined {
  const url = new URL(repoUrl);
  if (!policy.localAddresses) {
    const problem = localAddressProblem(url.hostname);
    if (problem) return `${problem}: the platform never dials one`;
  }
  const port = url.port || DEFAULT_PORTS[url.protocol];
  const allowed = policy.hosts.some((entry) => {
    const parsed = parseHostEntry(entry);
    return (
      parsed !== undefined && parsed.hostname === url.hostname && (parsed.port === undefined || parsed.port === port)
    );
  });
  if (allowed) return undefined;
  if (policy.hosts.length === 0)
    return `host ${url.host} is not allowed: no git hosts are configured (set gitHosts in the deployment configuration)`;
  return `host ${url.host} is not in the configured git hosts (${policy.hosts.join(', ')})`;
}
