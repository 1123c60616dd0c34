/**
 * Shared plumbing for talking to a git remote over smart HTTP with isomorphic-git: credentials as
 * a preemptive basic-auth header, and one classification of remote failures into the pipeline's
 * error classes.
 */
import * as git from 'isomorphic-git';
import { Errors, type HttpClient } from 'isomorphic-git';
import { PermanentJobError, TransientJobError } from '../../core/errors';
import { transientCause } from '../../core/transient-cause';
import { gitHttp } from './host-guard';
import { RemoteAnswerError } from './pkt-line';

/** HTTP basic credentials (for GitHub: any user name and a token as the password). Fetched by the caller. */
export interface GitAuth {
  readonly username: string;
  readonly password: string;
}

export interface RemoteOptions {
  readonly http: HttpClient;
  readonly url: string;
  readonly headers: Record<string, string>;
}

/** The client of callers that name none (the local platform, the CLI): no address guard, the loopback git server is theirs. */
let defaultHttp: HttpClient | undefined;

/** `http` defaults to gitHttp (host-guard.ts); tests wrap it only to inject faults or races. */
export function remoteOptions(
  url: string,
  auth?: GitAuth,
  http: HttpClient = (defaultHttp ??= gitHttp()),
): RemoteOptions {
  // Sent up front: saves the 401 round trip, and credentials never end up in a URL or a log line.
  const headers: Record<string, string> = auth
    ? { Authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` }
    : {};
  return { http, url, headers };
}

/**
 * 401 is retryable like the GitHub PR host's: a rotated credential reaches a warm container only
 * when its cached secret expires; a credential that stays wrong exhausts the retries and fails then.
 */
const RETRYABLE_STATUS = new Set([401, 408, 429]);

/** isomorphic-git's errors for a remote that answered, but not in git's smart HTTP protocol. */
const NOT_GIT = new Set<string>([
  Errors.SmartHttpError.code,
  Errors.EmptyServerResponseError.code,
  Errors.ParseError.code,
  Errors.UnknownTransportError.code,
  Errors.UrlParseError.code,
  Errors.RemoteCapabilityError.code,
]);

/** REJECTED_BY_TARGET for a remote that answered, but not in git's smart HTTP protocol (`seen`: what it answered). */
export function notGitError(action: string, seen: string, cause?: unknown): PermanentJobError {
  return new PermanentJobError(
    'REJECTED_BY_TARGET',
    `${action}: the remote does not speak git's smart HTTP protocol: ${seen}`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Classifies a failure talking to the remote by its cause: network errors, 5xx, 401, 408 and 429
 * are transient, and so are an error the remote reports in its answer and an answer cut short;
 * other HTTP statuses (403, 404) mean the host refuses the request, and a remote that does not
 * speak git will not start to: both are REJECTED_BY_TARGET. Errors already classified
 * and other errors pass through (the pipeline judges them by cause: core/transient-cause.ts).
 */
export function classifyRemoteError(error: unknown, action: string): unknown {
  if (error instanceof PermanentJobError || error instanceof TransientJobError) return error;
  if (error instanceof Errors.HttpError) {
    const { statusCode, statusMessage } = error.data;
    const message = `${action}: HTTP ${statusCode} ${statusMessage}`;
    if (statusCode >= 500 || RETRYABLE_STATUS.has(statusCode)) return new TransientJobError(message, { cause: error });
    return new PermanentJobError('REJECTED_BY_TARGET', message, { cause: error });
  }
  if (error instanceof RemoteAnswerError) {
    if (error.kind === 'malformed') return notGitError(action, error.message, error);
    return new TransientJobError(
      `${action}: ${error.kind === 'cut' ? 'the answer was cut short' : 'the remote reported an error'}: ${error.message}`,
      { cause: error },
    );
  }
  if (error instanceof Error && NOT_GIT.has((error as { code?: string }).code ?? '')) {
    return notGitError(action, error.message, error);
  }
  const cause = transientCause(error);
  if (cause !== undefined) return new TransientJobError(`${action}: network error ${cause}`, { cause: error });
  return error;
}

/**
 * The remote's arguments for one isomorphic-git call. The headers are a fresh copy each time:
 * isomorphic-git writes into the object it is given (Git-Protocol: version=2 for a protocol v2
 * request), and a receive-pack discovery that then carried that header got no service line.
 */
export function remoteArgs(remote: RemoteOptions): RemoteOptions {
  return { http: remote.http, url: remote.url, headers: { ...remote.headers } };
}

/** Current commit of `branch` on the remote, or undefined when the branch does not exist. */
export async function resolveBranchHead(
  repoUrl: string,
  branch: string,
  auth?: GitAuth,
  http?: HttpClient,
): Promise<string | undefined> {
  return remoteBranchHead(remoteOptions(repoUrl, auth, http), branch);
}

export async function remoteBranchHead(remote: RemoteOptions, branch: string): Promise<string | undefined> {
  const ref = `refs/heads/${branch}`;
  try {
    const refs = await git.listServerRefs({ ...remoteArgs(remote), prefix: ref });
    return refs.find((r) => r.ref === ref)?.oid;
  } catch (error) {
    throw classifyRemoteError(error, `list refs of ${remote.url}`);
  }
}

/**
 * POSTs `body` to one of the remote's smart HTTP services and returns the whole answer; an HTTP
 * status other than 200 throws isomorphic-git's HttpError, so classifyRemoteError judges it.
 * `headers` are added to the remote's own (protocol v2 sends `Git-Protocol`).
 */
export async function postService(
  remote: RemoteOptions,
  service: 'git-upload-pack' | 'git-receive-pack',
  body: Buffer,
  headers: Record<string, string> = {},
): Promise<Buffer> {
  const response = await remote.http.request({
    url: `${remote.url.replace(/\/$/, '')}/${service}`,
    method: 'POST',
    headers: {
      ...remote.headers,
      ...headers,
      'content-type': `application/x-${service}-request`,
      accept: `application/x-${service}-result`,
    },
    body: (async function* () {
      yield body;
    })(),
  });
  const chunks: Uint8Array[] = [];
  if (response.body) for await (const chunk of response.body) chunks.push(chunk);
  const answer = Buffer.concat(chunks);
  if (response.statusCode !== 200)
    throw new Errors.HttpError(response.statusCode, response.statusMessage, answer.toString('utf8'));
  return answer;
}
