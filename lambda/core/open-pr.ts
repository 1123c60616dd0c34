/** Pure rules of the open_pr stage: which repository and branches a job's pull request uses. */
import type { StageMessage } from './envelope';
import { PermanentJobError } from './errors';

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

export interface OpenPrResult extends Record<string, unknown> {
  readonly number: number;
  readonly url: string;
  readonly created: boolean;
  /** The workspace branch (the PR's head) and the commit it was pinned at. */
  readonly head: string;
  readonly sha: string;
}

export function openPrResult(job: StageMessage<'open_pr'>, pr: { number: number; url: string; created: boolean }): OpenPrResult {
  return { number: pr.number, url: pr.url, created: pr.created, head: job.pin.branch, sha: job.pin.sha };
}

/** What the PR host is asked for: the workspace branch into the job's base branch. */
export function pullRequestRequest(job: StageMessage<'open_pr'>): {
  repoUrl: string;
  head: string;
  base: string;
  title: string;
  body?: string;
} {
  return {
    repoUrl: job.pin.repoUrl,
    head: job.pin.branch,
    base: job.payload.baseBranch,
    title: job.payload.title,
    ...(job.payload.body === undefined ? {} : { body: job.payload.body }),
  };
}
