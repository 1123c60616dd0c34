/**
 * Secrets from Secrets Manager on AWS: open_pr's GitHub token, and the sequencer's git
 * credentials, which its git engine reads (aws-git-engine.ts). Apart from aws.ts, so that the git
 * engine's separate file takes it without the pipeline's composition.
 */
import type { SecretsManagerSecretsOptions, SecretsSource } from '../adapters/secrets';
import { onFirstUse } from './first-use';

// Loaded at the first secret read (aws.ts says why): Powertools' parameters and the SDK client.
const loadSecrets = (): typeof import('../adapters/secrets') => require('../adapters/secrets');
const loadSecretsManager = (): typeof import('@aws-sdk/client-secrets-manager') =>
  require('@aws-sdk/client-secrets-manager');

/** The secrets `arns` name, with an SDK client of `clientConfig` (awsClientConfig in aws.ts). */
export function secretsManagerSecrets(
  arns: Omit<SecretsManagerSecretsOptions, 'client'>,
  clientConfig: { endpoint?: string },
): SecretsSource {
  return onFirstUse(
    () =>
      new (loadSecrets().SecretsManagerSecrets)({
        client: new (loadSecretsManager().SecretsManagerClient)(clientConfig),
        ...arns,
      }),
  );
}
