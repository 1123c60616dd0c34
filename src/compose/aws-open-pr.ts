/** The open_pr function's dependencies on AWS: the pipeline's (aws.ts) plus GitHub and its token. */
import { Octokit } from '@octokit/core';
import { ENV, GITHUB_API_DEFAULT_URL } from '../../contract/runtime-env';
import type { OpenPrDeps } from '../core/jobs/open-pr';
import { GitHubPullRequestHost, octokitLog } from '../adapters/github-pr-host';
import { logger } from '../adapters/powertools';
import { awsClientConfig, awsPipelineDeps, requireEnv } from './aws';
import { secretsManagerSecrets } from './aws-secrets';

export function awsOpenPrDeps(env: NodeJS.ProcessEnv = process.env): OpenPrDeps {
  const secrets = secretsManagerSecrets({ githubTokenArn: requireEnv(ENV.githubTokenSecretArn, env) }, awsClientConfig(env));
  const baseUrl = env[ENV.githubApiUrl] || GITHUB_API_DEFAULT_URL;
  return {
    ...awsPipelineDeps('stage', env),
    // A client per job with the (cached) secret value: a rotated token is picked up without a restart.
    host: new GitHubPullRequestHost(async () => new Octokit({ auth: await secrets.githubToken(), baseUrl, log: octokitLog(logger) })),
  };
}
