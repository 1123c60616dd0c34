/**
 * The credential a test build checks its commit out with, handed to CodeBuild by reference. The
 * build's role reads only the checkout secrets under the stack's prefix (one per repository),
 * never the operator's secrets: the command stage writes there what the build may use, and names
 * the secret and the version it wrote in the StartBuild override (type SECRETS_MANAGER), so the
 * build reads exactly that version whatever another container writes meanwhile.
 *
 * What it writes comes from the read-only secret: its user and token as they are, or, when it
 * holds a GitHub App, a token minted for that one repository with `contents: read` only
 * (github-app.ts checkoutToken). The app's key never reaches the build, and neither does a token
 * that could push or reach another repository. Not a PLAINTEXT variable: CodeBuild shows those to
 * whoever may read the build.
 *
 * A version is written only when the credential changes (a new checkout token, a rotated secret):
 * one write per repository and container per token, not per build. The checkout secrets outlive a
 * deleted stack (they are created at run time, not by the template): the README says how to
 * remove them.
 */
import { createHash } from 'node:crypto';
import { CreateSecretCommand, PutSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { repositoryIdentity } from '../../contract/git-remotes';
import { CHECKOUT_ENV, GIT_CREDENTIAL_KEYS } from '../../contract/runtime-env';
import type { GitHubAppTokens } from './github-app';
import { INSTALLATION_TOKEN_USER } from './github-app';
import { isGitHubAppKey, parseRepoUrl, type GitHubAppKey } from './github-api';
import type { GitCredentials } from './secrets';

/** A StartBuild environment variable that CodeBuild resolves from Secrets Manager when the build starts. */
export interface SecretReference {
  readonly name: string;
  readonly value: string;
  readonly type: 'SECRETS_MANAGER';
}

/** What CodeBuildTestRunner asks for each build: the variables that carry the checkout credential. */
export interface BuildCheckout {
  environmentFor(repoUrl: string): Promise<SecretReference[]>;
}

export interface SecretsManagerBuildCheckoutOptions {
  readonly client: SecretsManagerClient;
  /** Where the checkout secrets live (CHECKOUT_SECRET_PREFIX): the build's role reads this prefix only. */
  readonly secretPrefix: string;
  /** The read-only secret's value (cached by the caller). */
  readonly readSecret: () => Promise<GitCredentials | GitHubAppKey>;
  /** The app's tokens, when the read-only secret holds one. */
  readonly tokensOf: (app: GitHubAppKey) => GitHubAppTokens;
}

interface Written {
  readonly arn: string;
  readonly versionId: string;
  readonly fingerprint: string;
}

/** The checkout secret of a repository: one name per repository however its URL is spelt. */
export function checkoutSecretName(prefix: string, repoUrl: string): string {
  return `${prefix}${createHash('sha256').update(repositoryIdentity(repoUrl)).digest('hex').slice(0, 32)}`;
}

export class SecretsManagerBuildCheckout implements BuildCheckout {
  private readonly written = new Map<string, Written>();

  constructor(private readonly options: SecretsManagerBuildCheckoutOptions) {}

  async environmentFor(repoUrl: string): Promise<SecretReference[]> {
    const secret = await this.options.readSecret();
    const credential: GitCredentials = isGitHubAppKey(secret)
      ? { username: INSTALLATION_TOKEN_USER, password: (await this.options.tokensOf(secret).checkoutToken(parseRepoUrl(repoUrl))).token }
      : secret;
    const name = checkoutSecretName(this.options.secretPrefix, repoUrl);
    const fingerprint = createHash('sha256').update(`${credential.username}\u0000${credential.password}`).digest('hex');
    let written = this.written.get(name);
    if (written?.fingerprint !== fingerprint) {
      written = { ...(await this.write(name, written?.arn, credential)), fingerprint };
      this.written.set(name, written);
    }
    // secret-id:json-key:version-stage:version-id, as CodeBuild reads a Secrets Manager reference.
    const reference = (key: string) => `${written.arn}:${key}::${written.versionId}`;
    return [
      { name: CHECKOUT_ENV.username, value: reference(GIT_CREDENTIAL_KEYS.username), type: 'SECRETS_MANAGER' },
      { name: CHECKOUT_ENV.password, value: reference(GIT_CREDENTIAL_KEYS.password), type: 'SECRETS_MANAGER' },
    ];
  }

  /**
   * A new version of the repository's checkout secret, created by the first write of any
   * container: a container's first write tries the name, so only the repository's very first
   * build pays for a refused request.
   */
  private async write(name: string, arn: string | undefined, credential: GitCredentials): Promise<Omit<Written, 'fingerprint'>> {
    const SecretString = JSON.stringify({ [GIT_CREDENTIAL_KEYS.username]: credential.username, [GIT_CREDENTIAL_KEYS.password]: credential.password });
    const put = async (SecretId: string) => {
      const out = await this.options.client.send(new PutSecretValueCommand({ SecretId, SecretString }));
      return { arn: out.ARN ?? SecretId, versionId: required(out.VersionId, 'PutSecretValue') };
    };
    try {
      return await put(arn ?? name);
    } catch (error) {
      if (errorName(error) !== 'ResourceNotFoundException') throw error;
    }
    try {
      const out = await this.options.client.send(
        new CreateSecretCommand({ Name: name, SecretString, Description: 'agent-jobs: the read-only credential a test build checks this repository out with (written by the command stages)' }),
      );
      return { arn: required(out.ARN, 'CreateSecret'), versionId: required(out.VersionId, 'CreateSecret') };
    } catch (error) {
      // Another container created it in between.
      if (errorName(error) === 'ResourceExistsException') return put(name);
      throw error;
    }
  }
}

const errorName = (error: unknown): unknown => (error as { name?: unknown } | null)?.name;

function required(value: string | undefined, operation: string): string {
  if (!value) throw new Error(`Secrets Manager ${operation} answered without the value it documents`);
  return value;
}
