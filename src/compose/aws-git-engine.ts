/**
 * The sequencer's git engine on AWS: the git adapter (isomorphic-git, with Node's zlib, http and
 * https) and the git credentials it reads from Secrets Manager, the one secret the sequencer
 * reads. The entry of a separate file of the sequencer's asset (the catalog's SEQUENCER
 * `separateFiles`), loaded at the first git call (aws-sequencer.ts): a cold start does not parse
 * it, and a path that never calls git never loads it.
 */
import { guardedGitHttp, IsomorphicGitWorkspace, type IsomorphicGitWorkspaceOptions } from '../adapters/git';
import { secretsManagerSecrets } from './aws-secrets';

export interface AwsGitEngineOptions extends Pick<IsomorphicGitWorkspaceOptions, 'workRoot' | 'cacheBytes' | 'logger'> {
  readonly gitCredentialsArn: string;
  /** SDK settings of the Secrets Manager client (awsClientConfig in aws.ts). */
  readonly clientConfig: { endpoint?: string };
}

export function awsGitEngine({ gitCredentialsArn, clientConfig, ...workspace }: AwsGitEngineOptions): IsomorphicGitWorkspace {
  const secrets = secretsManagerSecrets({ gitCredentialsArn }, clientConfig);
  return new IsomorphicGitWorkspace({
    ...workspace,
    credentials: () => secrets.gitCredentials(),
    // What is dialled, not only what is named: no loopback, link-local or metadata address after DNS, no redirect.
    http: guardedGitHttp(),
  });
}
