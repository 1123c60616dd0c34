/**
 * PullRequestHost on GitHub (or GitHub Enterprise, through the Octokit baseUrl), idempotent by head
 * branch: find the open PR of the branch, else create it; GitHub's 422 "A pull request already
 * exists" (a race with another worker, or our own create before a crash) means find again.
 */
// @octokit/core with route strings, not @octokit/rest: its generated method table (82 KiB of the
// open_pr bundle) would be carried for the two endpoints used here.
import type { Octokit } from '@octokit/core';
import { PermanentJobError, TransientJobError, errorMessage } from '../core/errors';
import type { Clock, JobLogger, PullRequestHost } from '../core/ports';
import { GitHubLimits, httpError, parseRepoUrl, validationMessages, type RepoCoordinates } from './github-api';
import { systemClock } from './system';

type FindOrCreateInput = Parameters<PullRequestHost['findOrCreate']>[0];
type PullRequestRef = Awaited<ReturnType<PullRequestHost['findOrCreate']>>;

/** Octokit's own request log, at debug: the pipeline logs the outcome once, with the job's ids. */
export function octokitLog(log: JobLogger) {
  return {
    debug: (m: string) => log.debug(m),
    info: (m: string) => log.debug(m),
    warn: (m: string) => log.warn(m),
    error: (m: string) => log.debug(m),
  };
}

/**
 * The Octokit client of a repository, built per job: its token comes from Secrets Manager (a
 * token, or a GitHub App's installation token for the repository's owner), which is async.
 */
export type OctokitProvider = (repository: RepoCoordinates) => Promise<Octokit>;

export interface GitHubPullRequestHostOptions {
  /** GitHub's limits as this container keeps to them. @default no pacing, GitHub's answers honoured */
  readonly limits?: GitHubLimits;
  /** @default the system clock */
  readonly clock?: Clock;
}

export class GitHubPullRequestHost implements PullRequestHost {
  private readonly limits: GitHubLimits;

  constructor(
    private readonly octokit: OctokitProvider,
    options: GitHubPullRequestHostOptions = {},
  ) {
    this.limits = options.limits ?? new GitHubLimits({ clock: options.clock ?? systemClock });
  }

  async findOrCreate(input: FindOrCreateInput): Promise<PullRequestRef> {
    const coordinates = parseRepoUrl(input.repoUrl);
    const { owner, repo } = coordinates;
    const what = `GitHub ${owner}/${repo}`;
    try {
      return await this.findOrCreateIn(coordinates, input, what);
    } catch (error) {
      throw this.limits.observe(error, what) ?? classify(error, `${owner}/${repo}`);
    }
  }

  private async findOrCreateIn(
    { owner, repo }: RepoCoordinates,
    input: FindOrCreateInput,
    what: string,
  ): Promise<PullRequestRef> {
    const octokit = await this.octokit({ owner, repo });
    const find = async (): Promise<PullRequestRef | undefined> => {
      this.limits.admit('GET', what);
      const { data } = await octokit.request('GET /repos/{owner}/{repo}/pulls', {
        owner,
        repo,
        head: `${owner}:${input.head}`,
        state: 'open',
        per_page: 1,
      });
      const pull = data[0];
      return pull && { number: pull.number, url: pull.html_url, created: false };
    };
    const existing = await find();
    if (existing) return existing;
    try {
      this.limits.admit('POST', what);
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
      if (!found)
        throw new TransientJobError(`GitHub says a pull request for ${input.head} exists but none is listed yet`);
      return found;
    }
  }
}

function isAlreadyExists(error: unknown): boolean {
  const http = httpError(error);
  return http?.status === 422 && validationMessages(http).some((m) => /pull request already exists/i.test(m));
}

/**
 * 5xx and network failures (Octokit reports those as status 500) are transient, and so is 401: a
 * rotated token reaches a warm container only when its cached secret expires (rate limits are
 * GitHubLimits' and come here no more). Any
 * other 4xx is GitHub refusing the request (bad base branch, no access, no commits between the
 * branches) and retrying cannot change that. An error that is no answer of GitHub's passes
 * through: the pipeline judges it by cause (core/transient-cause.ts).
 */
function classify(error: unknown, repo: string): unknown {
  if (error instanceof PermanentJobError || error instanceof TransientJobError) return error;
  const http = httpError(error);
  if (!http) return error;
  if (http.status >= 500 || http.status === 401) {
    return new TransientJobError(`GitHub ${repo}: ${errorMessage(error)}`, { cause: error });
  }
  const detail = validationMessages(http).join('; ') || errorMessage(error);
  return new PermanentJobError(
    'REJECTED_BY_TARGET',
    `GitHub ${repo} refused the pull request (${http.status}): ${detail}`,
    { cause: error },
  );
}
