/**
 * Deployment configuration: defaults, then `config/<env>.json` (optional), then cdk context
 * (`-c key=value`). Validated in one pass: a bad value throws one error naming every bad setting.
 *
 * Only shapes and types are checked here; rules that tie settings together (visibility vs.
 * timeout, batch size on FIFO, ...) are the constructs' job, so they hold for any caller.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Construct } from 'constructs';
import { z } from 'zod';
import { allWorkers, type WorkerSettings } from '../contract/job-types';
import { GITHUB_API_DEFAULT_URL } from '../contract/runtime-env';

export type WorkerName = ReturnType<typeof allWorkers>[number]['name'];

/** Settings of a worker that an environment may override; the rest is the catalog's. */
const TUNABLE_KEYS = ['timeoutSeconds', 'memoryMb', 'batchSize', 'maxConcurrency', 'maxReceiveCount', 'oldestMessageAlarmSeconds'] as const;
export type WorkerOverrides = Partial<Pick<WorkerSettings, (typeof TUNABLE_KEYS)[number]>>;

export interface AgentJobsConfig {
  /** Part of the stack name: `AgentJobs-<envName>`. */
  readonly envName: string;
  /** Every worker's settings: the catalog's, with this environment's overrides applied. */
  readonly workers: Readonly<Record<WorkerName, WorkerSettings>>;
  /** Subscribed to the alarm topic when set. */
  readonly alarmEmail?: string;
  /** Complete ARN of an existing secret `{ "username", "password" }`. @default a new secret to fill in */
  readonly gitCredentialsSecretArn?: string;
  /** Complete ARN of an existing GitHub token secret. @default a new secret to fill in */
  readonly githubTokenSecretArn?: string;
  /** GitHub REST API base URL (GitHub Enterprise: https://<host>/api/v3). */
  readonly githubApiUrl: string;
  /** Claim lease in seconds. @default each worker's timeout (a worker cannot outlive it) */
  readonly leaseSeconds?: number;
  readonly testRunnerTimeoutMinutes: number;
}

/** Thrown when the configuration is invalid; the message names every offending setting. */
export class InvalidConfigError extends Error {
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(`Invalid agent-jobs configuration (${source}):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'InvalidConfigError';
  }
}

const ENV_NAME = /^[a-z][a-z0-9-]{0,15}$/;
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/;
const positiveInt = z.coerce.number().int().positive();

const workerOverridesSchema = z.strictObject(Object.fromEntries(TUNABLE_KEYS.map((key) => [key, positiveInt.optional()])));
const workerNames = allWorkers().map((w) => w.name);

const configSchema = z.strictObject({
  workers: z.strictObject(Object.fromEntries(workerNames.map((name) => [name, workerOverridesSchema.optional()]))).optional(),
  alarmEmail: z.email().optional(),
  gitCredentialsSecretArn: z.string().regex(SECRET_ARN, 'must be a complete Secrets Manager secret ARN').optional(),
  githubTokenSecretArn: z.string().regex(SECRET_ARN, 'must be a complete Secrets Manager secret ARN').optional(),
  githubApiUrl: z.url({ protocol: /^https$/, error: 'must be an https URL' }).default(GITHUB_API_DEFAULT_URL),
  leaseSeconds: positiveInt.optional(),
  testRunnerTimeoutMinutes: positiveInt.max(2160).default(60),
});

/** Keys that may also come from cdk context (`-c alarmEmail=ops@example.com`). */
const CONTEXT_KEYS = ['alarmEmail', 'gitCredentialsSecretArn', 'githubTokenSecretArn', 'githubApiUrl', 'leaseSeconds', 'testRunnerTimeoutMinutes'] as const;

/** Validates `input` (file and context values merged) for environment `envName`. Pure. */
export function resolveConfig(envName: string, input: unknown, source = 'input'): AgentJobsConfig {
  if (!ENV_NAME.test(envName)) {
    throw new InvalidConfigError(source, [`env = ${JSON.stringify(envName)}: must match ${ENV_NAME.source} (it is part of the stack name)`]);
  }
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    throw new InvalidConfigError(source, parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`));
  }
  const { workers: overrides = {}, ...rest } = parsed.data;
  const workers = Object.fromEntries(
    allWorkers().map(({ name, settings }) => [name, { ...settings, ...overrides[name] }]),
  ) as Record<WorkerName, WorkerSettings>;
  return { envName, workers, ...rest };
}

/** Reads `-c env=<name>` (default dev), `<configDir>/<name>.json` when present, and context overrides. */
export function loadConfig(app: Construct, configDir: string): AgentJobsConfig {
  const envName: unknown = app.node.tryGetContext('env') ?? 'dev';
  if (typeof envName !== 'string') throw new InvalidConfigError('cdk context', ['env: must be a string']);
  const file = join(configDir, `${envName}.json`);
  // Only a valid env name reaches the file system (it becomes a path).
  const fromFile: unknown = ENV_NAME.test(envName) && existsSync(file) ? readJson(file) : {};
  const fromContext = Object.fromEntries(
    CONTEXT_KEYS.flatMap((key) => {
      const value: unknown = app.node.tryGetContext(key);
      return value === undefined ? [] : [[key, value]];
    }),
  );
  if (typeof fromFile !== 'object' || fromFile === null || Array.isArray(fromFile)) {
    throw new InvalidConfigError(file, ['(root): must be a JSON object']);
  }
  return resolveConfig(envName, { ...fromFile, ...fromContext }, `${file} and cdk context`);
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new InvalidConfigError(file, [`(root): not valid JSON: ${(error as Error).message}`]);
  }
}
