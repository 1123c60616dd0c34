/**
 * The sequencer's git engine on AWS: the git adapter (isomorphic-git, with Node's zlib, http and
 * https) and the git credentials it reads from Secrets Manager, the one secret the sequencer
 * reads: a user and password, or a GitHub App whose installation tokens it mints (github-app.ts,
 * loaded only for an app). The entry of a separate file of the sequencer's asset (the catalog's
 * SEQUENCER `separateFiles`), loaded at the first git call (aws-sequencer.ts): a cold start does
 * not parse it, and a path that never calls git never loads it.
 */
import { guardedGitHttp, IsomorphicGitWorkspace, type IsomorphicGitWorkspaceOptions } from '../adapters/git';
import { isGitHubAppKey } from '../adapters/github-api';
import { systemClock } from '../adapters/system';
import { secretsManagerSecrets } from './aws-secrets';
import { lazy } from './first-use';

// require(), not import(): Octokit and auth-app load only when the secret holds a GitHub App.
const loadGitHubApp = (): typeof import('../adapters/github-app') => require('../adapters/github-app');

export interface AwsGitEngineOptions extends Pick<IsomorphicGitWorkspaceOptions, 'workRoot' | 'cacheBytes' | 'logger'> {
  readonly gitCredentialsArn: string;
  /** GitHub's REST API, where a GitHub App's installation tokens are minted. */
  readonly githubApiUrl: string;
  /** SDK settings of the Secrets Manager client (awsClientConfig in aws.ts). */
  readonly clientConfig: { endpoint?: string };
}

export function awsGitEngine({
  gitCredentialsArn,
  githubApiUrl,
  clientConfig,
  ...workspace
}: AwsGitEngineOptions): IsomorphicGitWorkspace {
  const secrets = secretsManagerSecrets({ gitCredentialsArn }, clientConfig);
  const appTokens = lazy(() => loadGitHubApp().appTokensAt({ baseUrl: githubApiUrl, clock: systemClock }));
  return new IsomorphicGitWorkspace({
    ...workspace,
    credentials: async (repoUrl) => {
      const secret = await secrets.gitCredentials();
      return isGitHubAppKey(secret) ? loadGitHubApp().gitAuthFor(repoUrl, secret, appTokens()) : secret;
    },
    // What is dialled, not only what is named: no loopback, link-local or metadata address after DNS, no redirect.
    http: guardedGitHttp(),
  });
}
