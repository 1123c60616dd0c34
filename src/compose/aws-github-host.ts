/**
 * open_pr's GitHub host on AWS: Octokit, with the token it reads from Secrets Manager (or a GitHub
 * App's installation token for the repository, minted from the app the secret holds). The entry
 * of a separate file of open_pr's asset (the catalog's open_pr `separateFiles`), loaded at the
 * first pull request (aws-open-pr.ts): a cold start does not parse it, and a path that opens no
 * pull request (a duplicate, a skip) never loads it.
 */
import { Octokit } from '@octokit/core';
import type { ContentShare } from '../../contract/limits';
import { GitHubLimits } from '../adapters/github-api';
import { appTokensAt, restTokenFor } from '../adapters/github-app';
import { GitHubPullRequestHost, octokitLog } from '../adapters/github-pr-host';
import { systemClock } from '../adapters/system';
import type { JobLogger, PullRequestHost } from '../core/ports';
import { secretsManagerSecrets } from './aws-secrets';

export interface AwsGitHubHostOptions {
  readonly githubTokenArn: string;
  /** GitHub's REST API (GITHUB_API_URL, else api.github.com). */
  readonly baseUrl: string;
  /** SDK settings of the Secrets Manager client (awsClientConfig in aws.ts). */
  readonly clientConfig: { endpoint?: string };
  readonly logger: JobLogger;
  /** This container's share of GitHub's content-creation limits (GITHUB_CONTENT_PER_MINUTE, _PER_HOUR). */
  readonly contentShare: ContentShare;
}

export function awsGitHubHost({
  githubTokenArn,
  baseUrl,
  clientConfig,
  logger,
  contentShare,
}: AwsGitHubHostOptions): PullRequestHost {
  const secrets = secretsManagerSecrets({ githubTokenArn }, clientConfig);
  // One per container: what GitHub said about its limits holds for every job this container runs.
  const limits = new GitHubLimits({ contentShare, clock: systemClock });
  const tokensOf = appTokensAt({ baseUrl, clock: systemClock, limits });
  // A client per job with the (cached) secret value: a rotated token is picked up without a restart.
  return new GitHubPullRequestHost(
    async (repository) =>
      new Octokit({
        auth: await restTokenFor(repository, await secrets.githubToken(), tokensOf),
        baseUrl,
        log: octokitLog(logger),
      }),
    { limits },
  );
}
