/**
 * PullRequestHost on GitHub (or GitHub Enterprise, through the Octokit baseUrl), idempotent by head
 * branch: find the open PR of the branch, else create it; GitHub's 422 "A pull request already
 * exists" (a race with another worker, or our own create before a crash) means find again.
 */
// @octokit/core with route strings, not @octokit/rest: its generated method table (82 KiB of the
// open_pr bundle) would be carried for the two endpoints used here.
import type { Octokit } from '@octokit/core';
import { PermanentJobError, TransientJobError, errorMessage } from '../core/errors';
import type { JobLogger, PullRequestHost } from '../core/ports';

type FindOrCreateInput = Parameters<PullRequestHost['findOrCreate']>[0];
type PullRequestRef = Awaited<ReturnType<PullRequestHost['findOrCreate']>>;

export interface RepoCoordinates {
  readonly owner: string;
  readonly repo: string;
}

const NAME = /^[A-Za-z0-9_.-]+$/;

/**
 * Owner and repository of a GitHub (or GitHub Enterprise) clone URL: https://host/owner/repo(.git).
 * Throws a permanent error naming the URL: retrying cannot make it parse.
 */
export function parseRepoUrl(repoUrl: string): RepoCoordinates {
  let url: URL;
  try {
    url = new URL(repoUrl);
  } catch {
    throw new PermanentJobError('INVALID_JOB', `repository URL ${JSON.stringify(repoUrl)} is not a URL`);
  }
  const segments = url.pathname.replace(/\/+$/, '').split('/').filter(Boolean);
  const [owner, name] = segments;
  const repo = name?.replace(/\.git$/, '');
  if (segments.length !== 2 || owner === undefined || !repo || !NAME.test(owner) || !NAME.test(repo)) {
    throw new PermanentJobError('INVALID_JOB', `repository URL ${url.origin}${url.pathname} is not of the form https://host/owner/repo(.git)`);
  }
  return { owner, repo };
}

/** Octokit's own request log, at debug: the pipeline logs the outcome once, with the job's ids. */
export function octokitLog(log: JobLogger) {
  return { debug: (m: string) => log.debug(m), info: (m: string) => log.debug(m), warn: (m: string) => log.warn(m), error: (m: string) => log.debug(m) };
}

/** The Octokit client, built lazily: its token comes from Secrets Manager, which is async. */
export type OctokitProvider = () => Promise<Octokit>;

export class GitHubPullRequestHost implements PullRequestHost {
  constructor(private readonly octokit: OctokitProvider) {}

  async findOrCreate(input: FindOrCreateInput): Promise<PullRequestRef> {
    const { owner, repo } = parseRepoUrl(input.repoUrl);
    const octokit = await this.octokit();
    const find = async (): Promise<PullRequestRef | undefined> => {
      const { data } = await octokit.request('GET /repos/{owner}/{repo}/pulls', { owner, repo, head: `${owner}:${input.head}`, state: 'open', per_page: 1 });
      const pull = data[0];
      return pull && { number: pull.number, url: pull.html_url, created: false };
    };
    try {
      const existing = await find();
      if (existing) return existing;
      try {
        const { data } = await octokit.request('POST /repos/{owner}/{repo}/pulls', {
          owner,
          repo,
          head: input.head,
          base: input.base,
          title: input.title,
          ...(input.body === undefined ? {} : { body: input.body }),
        });
        return { number: data.number, url: data.html_url, created: true };
      } catch (error) {
        if (!isAlreadyExists(error)) throw error;
        const found = await find();
        // Exists but not open-listed yet (replica lag) or closed in between: try again later.
        if (!found) throw new TransientJobError(`GitHub says a pull request for ${input.head} exists but none is listed yet`);
        return found;
      }
    } catch (error) {
      throw classify(error, `${owner}/${repo}`);
    }
  }
}

interface HttpErrorShape {
  status: number;
  response?: { headers?: Record<string, string | number | undefined>; data?: unknown };
}

function httpError(error: unknown): HttpErrorShape | undefined {
  if (!(error instanceof Error)) return undefined;
  const status = (error as { status?: unknown }).status;
  return typeof status === 'number' ? (error as Error & HttpErrorShape) : undefined;
}

/** GitHub's messages from a 422: the top-level message and each entry of `errors`. */
function validationMessages(error: HttpErrorShape): string[] {
  const data = error.response?.data as { message?: unknown; errors?: unknown } | undefined;
  const messages = (Array.isArray(data?.errors) ? data.errors : []).map(entryMessage);
  return typeof data?.message === 'string' ? [data.message, ...messages] : messages;
}

/** An entry of a 422's `errors`: a string, or an object with or without a `message`. */
function entryMessage(entry: unknown): string {
  if (typeof entry === 'string') return entry;
  const message = (entry as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : JSON.stringify(entry);
}

function isAlreadyExists(error: unknown): boolean {
  const http = httpError(error);
  return http?.status === 422 && validationMessages(http).some((m) => /pull request already exists/i.test(m));
}

function isRateLimited(error: HttpErrorShape): boolean {
  if (error.status === 429) return true;
  if (error.status !== 403) return false;
  const headers = error.response?.headers ?? {};
  return String(headers['x-ratelimit-remaining']) === '0' || headers['retry-after'] !== undefined || validationMessages(error).some((m) => /rate limit/i.test(m));
}

/**
 * Rate limits, 5xx and network failures (Octokit reports those as status 500) are transient, and
 * so is 401: a rotated token reaches a warm container only when its cached secret expires. Any
 * other 4xx is GitHub refusing the request (bad base branch, no access, no commits between the
 * branches) and retrying cannot change that. An error that is no answer of GitHub's passes
 * through: the pipeline judges it by cause (core/transient-cause.ts).
 */
function classify(error: unknown, repo: string): unknown {
  if (error instanceof PermanentJobError || error instanceof TransientJobError) return error;
  const http = httpError(error);
  if (!http) return error;
  if (http.status >= 500 || http.status === 401 || isRateLimited(http)) {
    return new TransientJobError(`GitHub ${repo}: ${errorMessage(error)}`, { cause: error });
  }
  const detail = validationMessages(http).join('; ') || errorMessage(error);
  return new PermanentJobError('REJECTED_BY_TARGET', `GitHub ${repo} refused the pull request (${http.status}): ${detail}`, { cause: error });
}
