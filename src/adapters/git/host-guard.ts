/**
 * The HTTP client the platform talks to git remotes with (guarded on AWS). The git hosts rule
 * (contract/git-remotes.ts) checks the URL before a job's turn; this client checks what is actually
 * dialled, so an allowed name cannot lead anywhere the rule refuses:
 * - Names are resolved by the connection's own lookup, and a connection to a loopback, link-local
 *   or metadata address is refused (HOST_NOT_ALLOWED). Checked at connect time, not before, so a
 *   DNS answer that changes between a check and the connection changes nothing.
 * - Redirects are not followed: a 3xx answers as the host's refusal (REJECTED_BY_TARGET), so an
 *   allowed host cannot send the platform, or a request carrying its credential, elsewhere.
 */
import { lookup as dnsLookup } from 'node:dns';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { LookupFunction } from 'node:net';
import type { HttpClient } from 'isomorphic-git';
import nodeHttp from 'isomorphic-git/http/node';
import { localAddressProblem } from '../../../contract/git-remotes';
import { PermanentJobError } from '../../core/errors';

type LookupCallback = Parameters<LookupFunction>[2];

/** `resolve`, refusing any answer that holds an address never dialled. */
export function guardedLookup(resolve: LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, options, ((error, address, family) => {
      if (error) return callback(error, address, family);
      const addresses = typeof address === 'string' ? [address] : address.map((a) => a.address);
      for (const resolved of addresses) {
        const problem = localAddressProblem(resolved);
        if (problem)
          return callback(
            new PermanentJobError(
              'HOST_NOT_ALLOWED',
              `${hostname} resolves to ${resolved}: ${problem}: the platform never dials one`,
            ),
            address,
            family,
          );
      }
      return callback(null, address, family);
    }) as LookupCallback);
  };
}

/**
 * isomorphic-git's Node client over agents of its own, never following a redirect. Not Node's
 * global agent: since Node 19 it closes a socket idle for 5 seconds, and the client then gives up
 * with "Request timed out"; a git host slow to answer a push is busy, not gone.
 */
export function gitHttp(lookup?: LookupFunction): HttpClient {
  const options = { keepAlive: true, ...(lookup && { lookup }) };
  const agents: Readonly<Record<string, HttpAgent>> = {
    'http:': new HttpAgent(options),
    'https:': new HttpsAgent(options),
  };
  return {
    request: (request) =>
      nodeHttp.request({
        ...request,
        agent: agents[new URL(request.url).protocol],
        fetchOptions: { ...(request.fetchOptions as object | undefined), followRedirects: false },
      }),
  };
}

/** The client the sequencer uses on AWS: gitHttp over the guarded lookup. */
export function guardedGitHttp(resolve: LookupFunction = dnsLookup as LookupFunction): HttpClient {
  return gitHttp(guardedLookup(resolve));
}
