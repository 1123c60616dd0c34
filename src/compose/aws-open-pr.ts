/** The open_pr function's dependencies on AWS: the pipeline's (aws.ts) plus GitHub and its token. */
import { ENV } from '../../contract/runtime-env';
import type { OpenPrDeps } from '../core/jobs/open-pr';
import type { PullRequestHost } from '../core/ports';
import { logger } from '../adapters/powertools';
import { awsClientConfig, awsPipelineDeps, githubApiUrlEnv, positiveIntEnv, requireEnv } from './aws';
import { onFirstUse, requireSeparateFile } from './first-use';

/**
 * The GitHub host's file in the function's asset, set by the bundling (the catalog's open_pr
 * `separateFiles`); undefined when this runs from the sources.
 */
declare const GITHUB_HOST_FILE: string | undefined;
// Octokit and the Secrets Manager adapter load at the first pull request; bundled, from a file of
// their own, so a cold start does not parse them. esbuild drops the branch not taken.
const loadGitHubHost = (): typeof import('./aws-github-host') =>
  typeof GITHUB_HOST_FILE === 'string'
    ? (requireSeparateFile(GITHUB_HOST_FILE) as typeof import('./aws-github-host'))
    : require('./aws-github-host');

export function awsOpenPrDeps(env: NodeJS.ProcessEnv = process.env): OpenPrDeps {
  const githubTokenArn = requireEnv(ENV.githubTokenSecretArn, env);
  const baseUrl = githubApiUrlEnv(env);
  const contentShare = {
    perMinute: positiveIntEnv(ENV.githubContentPerMinute, env),
    perHour: positiveIntEnv(ENV.githubContentPerHour, env),
  };
  return {
    ...awsPipelineDeps('stage', env),
    host: onFirstUse<PullRequestHost>(() =>
      loadGitHubHost().awsGitHubHost({
        githubTokenArn,
        baseUrl,
        clientConfig: awsClientConfig(env),
        logger,
        contentShare,
      }),
    ),
  };
}
