/**
 * Secrets the workers need: git credentials (push/fetch workspace remotes) and the GitHub token.
 * Either may hold a GitHub App instead (`{"appId","privateKey","installationId"?}`): its
 * installation tokens are then minted per use (github-app.ts). On AWS they come from Secrets
 * Manager by ARN, cached across invocations; locally the loopback git server and the local PR
 * store need none, so a static source stands in.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SecretsProvider } from '@aws-lambda-powertools/parameters/secrets';
import * as z from 'zod/mini';
import '../../contract/zod-english';
import { ENV, SECRET_PLACEHOLDER } from '../../contract/runtime-env';
import { ConfigurationError } from '../core/errors';
import type { GitHubAppKey } from './github-api';

const gitCredentialsSchema = z.strictObject({
  username: z.string().check(z.minLength(1)),
  password: z.string().check(z.minLength(1)),
});
export type GitCredentials = z.infer<typeof gitCredentialsSchema>;

const tokenSchema = z.string().check(z.minLength(1), z.regex(/^\S+$/, 'must not contain whitespace'));

/** A GitHub App: its id, its private key (PEM) and, optionally, the installation to act as. */
const githubAppSchema = z.pipe(
  z.strictObject({
    appId: z.union([z.string().check(z.regex(/^\d+$/, 'must be the numeric app id')), z.int().check(z.positive())]),
    privateKey: z
      .string()
      .check(z.regex(/-----BEGIN (RSA )?PRIVATE KEY-----/, 'must be the PEM private key GitHub issued for the app')),
    installationId: z.optional(z.int().check(z.positive())),
  }),
  z.transform((app): GitHubAppKey => ({
    appId: String(app.appId),
    privateKey: app.privateKey,
    ...(app.installationId !== undefined && { installationId: app.installationId }),
  })),
);

/** A GitHub token secret is the bare token or `{ "token": "..." }` (or a GitHub App). */
const githubTokenSchema = z.union([
  tokenSchema,
  z.pipe(
    z.strictObject({ token: tokenSchema }),
    z.transform((s) => s.token),
  ),
]);

/**
 * A secret that names an `appId` is read as a GitHub App, any other as the secret's first shape:
 * chosen by shape rather than by a union, so a malformed value is told what its own shape lacks
 * (a union's error names no field).
 */
function orGitHubApp<T>(other: z.ZodMiniType<T>): (value: unknown) => z.ZodMiniType<T | GitHubAppKey> {
  return (value) => (typeof value === 'object' && value !== null && 'appId' in value ? githubAppSchema : other);
}

export interface SecretsSource {
  /** undefined: the remote needs no authentication. */
  gitCredentials(): Promise<GitCredentials | GitHubAppKey | undefined>;
  /** undefined: the PR host needs no token. */
  githubToken(): Promise<string | GitHubAppKey | undefined>;
}

export interface SecretsManagerSecretsOptions {
  readonly client: SecretsManagerClient;
  readonly gitCredentialsArn?: string;
  /** The read-only credential of test builds' checkouts (the command stages read it, never the build). */
  readonly gitReadCredentialsArn?: string;
  readonly githubTokenArn?: string;
  /** Seconds a fetched value is reused (rotation becomes visible after this). @default 300 */
  readonly maxAgeSeconds?: number;
}

export class SecretsManagerSecrets implements SecretsSource {
  private readonly provider: SecretsProvider;

  constructor(private readonly options: SecretsManagerSecretsOptions) {
    this.provider = new SecretsProvider({ awsSdkV3Client: options.client });
  }

  async gitCredentials(): Promise<GitCredentials | GitHubAppKey> {
    const { arn, raw } = await this.fetch(this.options.gitCredentialsArn, ENV.gitCredentialsSecretArn);
    return parseGitCredentials(raw, `${arn} (${ENV.gitCredentialsSecretArn})`);
  }

  /** The read-only credential of test builds: a user and token, or a GitHub App (checkout tokens are minted from it). */
  async readGitCredentials(): Promise<GitCredentials | GitHubAppKey> {
    const { arn, raw } = await this.fetch(this.options.gitReadCredentialsArn, ENV.gitReadCredentialsSecretArn);
    return parseGitCredentials(raw, `${arn} (${ENV.gitReadCredentialsSecretArn})`);
  }

  async githubToken(): Promise<string | GitHubAppKey> {
    const { arn, raw } = await this.fetch(this.options.githubTokenArn, ENV.githubTokenSecretArn);
    return parseGithubToken(raw, `${arn} (${ENV.githubTokenSecretArn})`);
  }

  private async fetch(arn: string | undefined, envName: string): Promise<{ arn: string; raw: unknown }> {
    if (!arn) throw new ConfigurationError(`${envName} is not set`);
    return { arn, raw: await this.provider.get(arn, { maxAge: this.options.maxAgeSeconds ?? 300 }) };
  }
}

/**
 * A git credentials secret's value (`{"username","password"}`, or a GitHub App), validated: the
 * push secret's, and the read-only one's (test builds' checkouts: an app gives each build a token
 * for its repository that may only read). `secret` names it in
 * errors (ARN and setting); an error never contains the value. The post-deploy check reads the
 * secrets through these too, so the functions and the check agree on what a good secret is.
 */
export function parseGitCredentials(raw: unknown, secret: string): GitCredentials | GitHubAppKey {
  return parseSecretValue(raw, secret, orGitHubApp(gitCredentialsSchema), 'json');
}

/** A GitHub token secret's value: the bare token, `{"token"}`, or a GitHub App. */
export function parseGithubToken(raw: unknown, secret: string): string | GitHubAppKey {
  return parseSecretValue(raw, secret, orGitHubApp(githubTokenSchema), 'auto');
}

function parseSecretValue<T>(
  raw: unknown,
  secret: string,
  schemaFor: (value: unknown) => z.ZodMiniType<T>,
  format: 'json' | 'auto',
): T {
  const value = typeof raw === 'string' ? parseSecret(raw, format) : raw;
  if (holdsPlaceholder(value)) {
    throw new ConfigurationError(
      `secret ${secret} still holds the placeholder ${SECRET_PLACEHOLDER} the stack created it with: store the credential in it (README, Deploy)`,
    );
  }
  const parsed = schemaFor(value).safeParse(value);
  // The message names the secret and the fields, never the value.
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(value)'}: ${i.message}`).join('; ');
    throw new ConfigurationError(`secret ${secret} is malformed: ${problems}`);
  }
  return parsed.data;
}

/** A secret the stack created and nobody filled in: the placeholder as the value or as any field. */
function holdsPlaceholder(value: unknown): boolean {
  if (value === SECRET_PLACEHOLDER) return true;
  return typeof value === 'object' && value !== null && Object.values(value).includes(SECRET_PLACEHOLDER);
}

function parseSecret(raw: string, format: 'json' | 'auto'): unknown {
  const looksJson = raw.trimStart().startsWith('{');
  if (format === 'auto' && !looksJson) return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** The local platform's source: fixed values, or none. */
export class StaticSecrets implements SecretsSource {
  constructor(
    private readonly values: {
      readonly gitCredentials?: GitCredentials | GitHubAppKey;
      readonly githubToken?: string | GitHubAppKey;
    } = {},
  ) {}

  async gitCredentials(): Promise<GitCredentials | GitHubAppKey | undefined> {
    return this.values.gitCredentials;
  }

  async githubToken(): Promise<string | GitHubAppKey | undefined> {
    return this.values.githubToken;
  }
}
