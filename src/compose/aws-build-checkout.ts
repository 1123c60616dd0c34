/**
 * A command stage's build checkout on AWS (build-checkout.ts): the read-only secret read from
 * Secrets Manager, checkout tokens minted from it when it holds a GitHub App, and the repository's
 * checkout secret written for the build. The entry of a separate file of each command stage's
 * asset (the catalog's commandStage `separateFiles`), loaded at the first build start
 * (aws-command-stage.ts): a cold start does not parse auth-app and Octokit, and a path that starts
 * no build (a duplicate, a recorded build) never loads them.
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SecretsManagerBuildCheckout, type BuildCheckout } from '../adapters/build-checkout';
import { appTokensAt } from '../adapters/github-app';
import { SecretsManagerSecrets } from '../adapters/secrets';
import { systemClock } from '../adapters/system';

export interface AwsBuildCheckoutOptions {
  readonly gitReadCredentialsArn: string;
  readonly secretPrefix: string;
  /** GitHub's REST API, where a GitHub App's checkout tokens are minted. */
  readonly githubApiUrl: string;
  /** SDK settings of the Secrets Manager client (awsClientConfig in aws.ts). */
  readonly clientConfig: { endpoint?: string };
}

export function awsBuildCheckout({
  gitReadCredentialsArn,
  secretPrefix,
  githubApiUrl,
  clientConfig,
}: AwsBuildCheckoutOptions): BuildCheckout {
  const client = new SecretsManagerClient(clientConfig);
  const secrets = new SecretsManagerSecrets({ client, gitReadCredentialsArn });
  const tokensOf = appTokensAt({ baseUrl: githubApiUrl, clock: systemClock });
  return new SecretsManagerBuildCheckout({
    client,
    secretPrefix,
    readSecret: () => secrets.readGitCredentials(),
    tokensOf,
    clock: systemClock,
  });
}
