/**
 * Secrets the workers need: git credentials (push/fetch workspace remotes) and the GitHub token.
 * On AWS they come from Secrets Manager by ARN, cached across invocations; locally the loopback git
 * server and the local PR store need none, so a static source stands in.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SecretsProvider } from '@aws-lambda-powertools/parameters/secrets';
import * as z from 'zod/mini';
import '../../contract/zod-english';
import { ENV, SECRET_PLACEHOLDER } from '../../contract/runtime-env';
import { ConfigurationError } from '../core/errors';

const gitCredentialsSchema = z.strictObject({ username: z.string().check(z.minLength(1)), password: z.string().check(z.minLength(1)) });
export type GitCredentials = z.infer<typeof gitCredentialsSchema>;

const tokenSchema = z.string().check(z.minLength(1), z.regex(/^\S+$/, 'must not contain whitespace'));
/** A GitHub token secret is either the bare token or `{ "token": "..." }`. */
const githubTokenSchema = z.union([tokenSchema, z.pipe(z.strictObject({ token: tokenSchema }), z.transform((s) => s.token))]);

export interface SecretsSource {
  /** undefined: the remote needs no authentication. */
  gitCredentials(): Promise<GitCredentials | undefined>;
  /** undefined: the PR host needs no token. */
  githubToken(): Promise<string | undefined>;
}

export interface SecretsManagerSecretsOptions {
  readonly client: SecretsManagerClient;
  readonly gitCredentialsArn?: string;
  readonly githubTokenArn?: string;
  /** Seconds a fetched value is reused (rotation becomes visible after this). @default 300 */
  readonly maxAgeSeconds?: number;
}

export class SecretsManagerSecrets implements SecretsSource {
  private readonly provider: SecretsProvider;

  constructor(private readonly options: SecretsManagerSecretsOptions) {
    this.provider = new SecretsProvider({ awsSdkV3Client: options.client });
  }

  async gitCredentials(): Promise<GitCredentials> {
    const { arn, raw } = await this.fetch(this.options.gitCredentialsArn, ENV.gitCredentialsSecretArn);
    return parseGitCredentials(raw, `${arn} (${ENV.gitCredentialsSecretArn})`);
  }

  async githubToken(): Promise<string> {
    const { arn, raw } = await this.fetch(this.options.githubTokenArn, ENV.githubTokenSecretArn);
    return parseGithubToken(raw, `${arn} (${ENV.githubTokenSecretArn})`);
  }

  private async fetch(arn: string | undefined, envName: string): Promise<{ arn: string; raw: unknown }> {
    if (!arn) throw new ConfigurationError(`${envName} is not set`);
    return { arn, raw: await this.provider.get(arn, { maxAge: this.options.maxAgeSeconds ?? 300 }) };
  }
}

/**
 * A git credentials secret's value (`{"username","password"}`), validated. `secret` names it in
 * errors (ARN and setting); an error never contains the value. The post-deploy check reads the
 * secrets through these too, so the functions and the check agree on what a good secret is.
 */
export function parseGitCredentials(raw: unknown, secret: string): GitCredentials {
  return parseSecretValue(raw, secret, gitCredentialsSchema, 'json');
}

/** A GitHub token secret's value: the bare token, or `{"token"}`. */
export function parseGithubToken(raw: unknown, secret: string): string {
  return parseSecretValue(raw, secret, githubTokenSchema, 'auto');
}

function parseSecretValue<T>(raw: unknown, secret: string, schema: z.ZodMiniType<T>, format: 'json' | 'auto'): T {
  const value = typeof raw === 'string' ? parseSecret(raw, format) : raw;
  if (holdsPlaceholder(value)) {
    throw new ConfigurationError(`secret ${secret} still holds the placeholder ${SECRET_PLACEHOLDER} the stack created it with: store the credential in it (README, Deploy)`);
  }
  const parsed = schema.safeParse(value);
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
  constructor(private readonly values: { readonly gitCredentials?: GitCredentials; readonly githubToken?: string } = {}) {}

  async gitCredentials(): Promise<GitCredentials | undefined> {
    return this.values.gitCredentials;
  }

  async githubToken(): Promise<string | undefined> {
    return this.values.githubToken;
  }
}
