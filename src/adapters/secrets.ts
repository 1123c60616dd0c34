/**
 * Secrets the workers need: git credentials (push/fetch workspace remotes) and the GitHub token.
 * On AWS they come from Secrets Manager by ARN, cached across invocations; locally the loopback git
 * server and the local PR store need none, so a static source stands in.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SecretsProvider } from '@aws-lambda-powertools/parameters/secrets';
import * as z from 'zod/mini';
import '../../contract/zod-english';
import { ENV } from '../../contract/runtime-env';
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

  gitCredentials(): Promise<GitCredentials> {
    return this.fetch(this.options.gitCredentialsArn, ENV.gitCredentialsSecretArn, gitCredentialsSchema, 'json');
  }

  githubToken(): Promise<string> {
    return this.fetch(this.options.githubTokenArn, ENV.githubTokenSecretArn, githubTokenSchema, 'auto');
  }

  private async fetch<T>(arn: string | undefined, envName: string, schema: z.ZodMiniType<T>, format: 'json' | 'auto'): Promise<T> {
    if (!arn) throw new ConfigurationError(`${envName} is not set`);
    const raw = await this.provider.get(arn, { maxAge: this.options.maxAgeSeconds ?? 300 });
    const value = typeof raw === 'string' ? parseSecret(raw, format) : raw;
    const parsed = schema.safeParse(value);
    // The message names the secret and the fields, never the value.
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(value)'}: ${i.message}`).join('; ');
      throw new ConfigurationError(`secret ${arn} (${envName}) is malformed: ${problems}`);
    }
    return parsed.data;
  }
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
