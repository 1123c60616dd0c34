/**
 * The credential a test build checks its commit out with, handed to CodeBuild by reference. The
 * build's role reads only the checkout secrets under the stack's prefix (one per repository),
 * never the operator's secrets: the command stages keep there what the build may use, and name the
 * secret and a version of it in the StartBuild override (type SECRETS_MANAGER), so the build reads
 * exactly that version whatever another container writes meanwhile.
 *
 * What they write comes from the read-only secret: its user and token as they are, or, when it
 * holds a GitHub App, a token minted for that one repository with `contents: read` only
 * (github-app.ts checkoutToken). The app's key never reaches the build, and neither does a token
 * that could push or reach another repository. Not a PLAINTEXT variable: CodeBuild shows those to
 * whoever may read the build.
 *
 * The checkout secret is shared by every container, and a version is written only when the
 * current one no longer serves: each build start reads it (GetSecretValue, held in memory while it
 * serves) and names it as it is when it holds the same user and token, or an app token with at
 * least CHECKOUT_MARGIN_MS to live (its expiry is stored beside it). So a repository costs one
 * version and one mint per token (about one every 40 minutes), however many containers start its
 * builds, within Secrets Manager's advice of at most one write per secret every 10 minutes (its
 * unlabeled versions are removed only past 100 and 24 hours), and a start retried after a crash
 * names the version the first attempt named. Containers that find the same version stale at once
 * each mint, but only one version is added: each writes with a ClientRequestToken derived from the
 * stale version's id, which Secrets Manager takes as the new version's id and refuses with another
 * value, and the others name the version that won.
 *
 * Secrets Manager saying "not now" (its request quotas, past the SDK's own retries; a quota of the
 * service) is a wait like CodeBuild's build quota (RetryAfterError, SECRETS_QUOTA_ERRORS): the
 * regional write quota is shared by the whole account and cannot be raised, and a failure would
 * spend the job's receives while another writer holds it.
 *
 * The checkout secrets outlive a deleted stack (they are created at run time, not by the
 * template): the README says how to remove them. One scheduled for deletion (DeleteSecret with a
 * recovery window) answers InvalidRequestException to every read and write until the deletion
 * completes, so a build start that meets it restores it (RestoreSecret) and goes on: the secret is
 * the platform's working copy, re-creatable at any time, and the stage keeps using it; one it cannot
 * restore is refused naming the secret and the remedy.
 */
import { createHash } from 'node:crypto';
import {
  CreateSecretCommand,
  DescribeSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  RestoreSecretCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import * as z from 'zod/mini';
import { repositoryIdentity } from '../../contract/git-remotes';
import { CHECKOUT_ENV, GIT_CREDENTIAL_KEYS } from '../../contract/runtime-env';
import { errorMessage, errorName, limitFrom } from '../core/errors';
import type { Clock } from '../core/ports';
import type { GitHubAppTokens } from './github-app';
import { CHECKOUT_MARGIN_MS, INSTALLATION_TOKEN_USER } from './github-app';
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
  /** What an app token's time to live is measured against. */
  readonly clock: Clock;
}

/**
 * A checkout secret's value: the build reads `username` and `password` (GIT_CREDENTIAL_KEYS); an
 * app token also carries its expiry and app, so that another container can tell whether it serves.
 */
const checkoutValueSchema = z.object({
  username: z.string(),
  password: z.string(),
  expiresAt: z.optional(z.string()),
  appId: z.optional(z.string()),
});
type CheckoutValue = z.infer<typeof checkoutValueSchema>;

/** A version of a repository's checkout secret, as a build names it. */
interface CheckoutVersion {
  readonly arn: string;
  readonly versionId: string;
  readonly value: CheckoutValue;
}

/**
 * Secrets Manager's answers that mean "not now": throttling past its request quotas (the SDK's
 * throttling names; it gives up after its retries), and LimitExceededException, "the request would
 * exceed one of the Secrets Manager quotas" (its API reference, which does not say which: a
 * secret's versions, written faster than unlabeled ones are removed after 24 hours, are one the
 * user guide names). Neither names a time: the job waits on the pipeline's quota back-off.
 */
const SECRETS_QUOTA_ERRORS = new Set([
  'ThrottlingException',
  'Throttling',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'LimitExceededException',
]);

/** The checkout secret of a repository: one name per repository however its URL is spelt. */
export function checkoutSecretName(prefix: string, repoUrl: string): string {
  return `${prefix}${createHash('sha256').update(repositoryIdentity(repoUrl)).digest('hex').slice(0, 32)}`;
}

export class SecretsManagerBuildCheckout implements BuildCheckout {
  /** The version last named per checkout secret: no request while it serves. */
  private readonly held = new Map<string, CheckoutVersion>();

  constructor(private readonly options: SecretsManagerBuildCheckoutOptions) {}

  async environmentFor(repoUrl: string): Promise<SecretReference[]> {
    try {
      return await this.referencesFor(repoUrl);
    } catch (error) {
      throw limitFrom(
        error,
        SECRETS_QUOTA_ERRORS,
        'secrets-quota',
        'Secrets Manager refused a checkout secret request for now',
      );
    }
  }

  private async referencesFor(repoUrl: string): Promise<SecretReference[]> {
    const secret = await this.options.readSecret();
    const name = checkoutSecretName(this.options.secretPrefix, repoUrl);
    let version = this.held.get(name);
    if (!version || !this.serves(version.value, secret)) {
      const settled = () => this.current(name).then((found) => this.settle(name, found, secret, repoUrl));
      version = await settled().catch(async (error: unknown) => {
        if (!(await this.restoredFromDeletion(name, error))) throw error;
        return settled();
      });
      this.held.set(name, version);
    }
    // secret-id:json-key:version-stage:version-id, as CodeBuild reads a Secrets Manager reference.
    const reference = (key: string) => `${version.arn}:${key}::${version.versionId}`;
    return [
      { name: CHECKOUT_ENV.username, value: reference(GIT_CREDENTIAL_KEYS.username), type: 'SECRETS_MANAGER' },
      { name: CHECKOUT_ENV.password, value: reference(GIT_CREDENTIAL_KEYS.password), type: 'SECRETS_MANAGER' },
    ];
  }

  /** Whether a build may be started with this value: the read-only secret's user and token, or a token of its app with the margin to live. */
  private serves(value: CheckoutValue, secret: GitCredentials | GitHubAppKey): boolean {
    if (!isGitHubAppKey(secret))
      return value.appId === undefined && value.username === secret.username && value.password === secret.password;
    return (
      value.appId === secret.appId &&
      value.expiresAt !== undefined &&
      Date.parse(value.expiresAt) - this.options.clock.now() > CHECKOUT_MARGIN_MS
    );
  }

  /**
   * `found` if it serves, else a new version in its place. Another container's version that wins
   * the write is settled the same way: it serves unless the containers disagree on the read-only
   * secret, which they do only until each has read it again after a rotation.
   */
  private async settle(
    name: string,
    found: CheckoutVersion | undefined,
    secret: GitCredentials | GitHubAppKey,
    repoUrl: string,
  ): Promise<CheckoutVersion> {
    if (found && this.serves(found.value, secret)) return found;
    const value = await this.valueFor(secret, repoUrl);
    const written = found ? await this.replace(found, value) : await this.create(name, value);
    return (
      written ??
      this.settle(
        name,
        found ? await this.version(found.arn, successorOf(found.versionId)) : await this.current(name),
        secret,
        repoUrl,
      )
    );
  }

  private async valueFor(secret: GitCredentials | GitHubAppKey, repoUrl: string): Promise<CheckoutValue> {
    if (!isGitHubAppKey(secret)) return { username: secret.username, password: secret.password };
    const token = await this.options.tokensOf(secret).checkoutToken(parseRepoUrl(repoUrl));
    return {
      username: INSTALLATION_TOKEN_USER,
      password: token.token,
      expiresAt: new Date(token.expiresAt).toISOString(),
      appId: secret.appId,
    };
  }

  /**
   * The version after `found`, written only if no other container wrote it first: its id is
   * derived from `found`'s, and Secrets Manager refuses that id with another value. undefined: it
   * lost to another container's.
   */
  private async replace(found: CheckoutVersion, value: CheckoutValue): Promise<CheckoutVersion | undefined> {
    const versionId = successorOf(found.versionId);
    try {
      const out = await this.options.client.send(
        new PutSecretValueCommand({
          SecretId: found.arn,
          SecretString: JSON.stringify(value),
          ClientRequestToken: versionId,
        }),
      );
      return { arn: out.ARN ?? found.arn, versionId: required(out.VersionId, 'PutSecretValue'), value };
    } catch (error) {
      // Whatever the refusal is named: the version exists (another container's), or the error stands.
      if (await this.version(found.arn, versionId).catch(() => undefined)) return undefined;
      throw error;
    }
  }

  /** The repository's first version, with the secret. undefined: another container created it first. */
  private async create(name: string, value: CheckoutValue): Promise<CheckoutVersion | undefined> {
    try {
      const out = await this.options.client.send(
        new CreateSecretCommand({
          Name: name,
          SecretString: JSON.stringify(value),
          Description:
            'agent-jobs: the read-only credential a test build checks this repository out with (written by the command stages)',
        }),
      );
      return { arn: required(out.ARN, 'CreateSecret'), versionId: required(out.VersionId, 'CreateSecret'), value };
    } catch (error) {
      if (errorName(error) === 'ResourceExistsException') return undefined;
      throw error;
    }
  }

  /**
   * Whether `error` came from the secret being scheduled for deletion (InvalidRequestException,
   * with a DeletedDate on the secret) and the secret is now restored. false for any other error.
   * Thrown: a secret scheduled for deletion that RestoreSecret would not restore.
   */
  private async restoredFromDeletion(name: string, error: unknown): Promise<boolean> {
    if (errorName(error) !== 'InvalidRequestException') return false;
    // The error is also Secrets Manager's answer to other misuses: the secret's DeletedDate tells.
    const described = await this.options.client.send(new DescribeSecretCommand({ SecretId: name }));
    if (described.DeletedDate === undefined) return false;
    try {
      await this.options.client.send(new RestoreSecretCommand({ SecretId: name }));
    } catch (restoreError) {
      throw new Error(
        `checkout secret ${name} is scheduled for deletion (on ${described.DeletedDate.toISOString()}) and could not be restored (${String(errorName(restoreError) ?? 'error')}: ${errorMessage(restoreError)}): ` +
          `restore it ("aws secretsmanager restore-secret --secret-id ${name}") or let the deletion complete; until then no build of this repository can start`,
        { cause: restoreError },
      );
    }
    return true;
  }

  /** The secret's current version (AWSCURRENT), or undefined when no container has created it yet. */
  private async current(name: string): Promise<CheckoutVersion | undefined> {
    try {
      return await this.version(name);
    } catch (error) {
      if (errorName(error) === 'ResourceNotFoundException') return undefined;
      throw error;
    }
  }

  private async version(secretId: string, versionId?: string): Promise<CheckoutVersion> {
    const out = await this.options.client.send(
      new GetSecretValueCommand({ SecretId: secretId, ...(versionId && { VersionId: versionId }) }),
    );
    // A value this code did not write serves no build: it is replaced.
    const parsed = checkoutValueSchema.safeParse(parseJson(out.SecretString));
    const value = parsed.success ? parsed.data : { username: '', password: '' };
    return { arn: required(out.ARN, 'GetSecretValue'), versionId: required(out.VersionId, 'GetSecretValue'), value };
  }
}

/**
 * The id of the version that replaces `versionId`: the same for every container that finds that
 * version stale, so only one of their writes adds a version. UUID-shaped, as Secrets Manager
 * recommends for a ClientRequestToken (32 to 64 characters).
 */
function successorOf(versionId: string): string {
  const hex = createHash('sha256').update(`agent-jobs checkout version after ${versionId}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

function parseJson(text: string | undefined): unknown {
  try {
    return JSON.parse(text ?? 'null');
  } catch {
    return undefined;
  }
}

function required(value: string | undefined, operation: string): string {
  if (!value) throw new Error(`Secrets Manager ${operation} answered without the value it documents`);
  return value;
}
