/**
 * Deployment configuration: defaults, then `config/<env>.json` (required: it names the environment), then cdk context
 * (`-c key=value`, nested settings as dotted keys: `-c workers.sequencer.batchSize=5`). Validated
 * in one pass: a bad value or an unknown setting throws one error naming every bad setting.
 *
 * Only shapes and types are checked here; rules that tie settings together (visibility vs.
 * timeout, batch size on FIFO, ...) are the constructs' job, so they hold for any caller.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Construct } from 'constructs';
import * as z from 'zod';
import { gitHostEntryProblem, gitHostList } from '../contract/git-remotes';
import { MAX_BUILD_TIMEOUT_MINUTES, allWorkers, type WorkerSettings } from '../contract/job-types';
import { DEFAULT_BUILD_CONCURRENCY_QUOTA, GITHUB_CONTENT_LIMITS } from '../contract/limits';
import { GITHUB_API_DEFAULT_URL } from '../contract/runtime-env';

export type WorkerName = ReturnType<typeof allWorkers>[number]['name'];

/** Settings of a worker that an environment may override, each with its description; the rest is the catalog's. */
export const TUNABLE_SETTINGS = {
  timeoutSeconds: "Function timeout. The queue's visibility is 6x this, and the function heartbeats to it.",
  memoryMb: 'Function memory in MB.',
  batchSize: 'Records per event-source-mapping batch (at most 10 on FIFO).',
  maxConcurrency: "The event source mapping's MaximumConcurrency (2..1000).",
  maxReceiveCount:
    'Deliveries before SQS moves a message to the DLQ (>= 5). The handler gives up one delivery earlier and fences the workspace.',
  oldestMessageAlarmSeconds: "Alarm threshold on the age of the queue's oldest message.",
} as const;
const TUNABLE_KEYS = Object.keys(TUNABLE_SETTINGS) as (keyof typeof TUNABLE_SETTINGS)[];
export type WorkerOverrides = Partial<Pick<WorkerSettings, keyof typeof TUNABLE_SETTINGS>>;

export interface AgentJobsConfig {
  /** Part of the stack name: `AgentJobs-<envName>`. */
  readonly envName: string;
  /** Every worker's settings: the catalog's, with this environment's overrides applied. */
  readonly workers: Readonly<Record<WorkerName, WorkerSettings>>;
  /** Subscribed to the alarm topic when set. */
  readonly alarmEmail?: string;
  /** Complete ARN of an existing secret `{ "username", "password" }` the sequencer pushes with. @default a new secret to fill in */
  readonly gitCredentialsSecretArn?: string;
  /** Complete ARN of an existing read-only git credential for test builds, same shape. @default a new secret to fill in */
  readonly gitReadCredentialsSecretArn?: string;
  /** Complete ARN of an existing GitHub token secret. @default a new secret to fill in */
  readonly githubTokenSecretArn?: string;
  /** Customer-managed KMS key that encrypts the secrets given by ARN (readers get kms:Decrypt through Secrets Manager only). */
  readonly secretsKmsKeyArn?: string;
  /** GitHub REST API base URL (GitHub Enterprise: https://<host>/api/v3). */
  readonly githubApiUrl: string;
  /**
   * The git hosts the sequencer may dial (`github.com`, `git.example.com:8443`). @default none:
   * every repository is refused (HOST_NOT_ALLOWED), so `cdk synth` (loadConfig) refuses an
   * environment without one; the shipped configurations allow github.com.
   */
  readonly gitHosts: readonly string[];
  /**
   * Content-creating GitHub requests (pull requests opened) the platform makes an hour, all open_pr
   * containers together: each paces itself to its share. @default 500 (GitHub's secondary limit)
   */
  readonly githubContentRequestsPerHour: number;
  /**
   * The account's Service Quotas value "Concurrently running builds for ARM/Small environment"
   * (or Linux/Small where the builds run on x86: BUILD_QUOTA_CODES, contract/limits.ts): the
   * project's concurrent build limit, so a start beyond waits. CreateProject fails when it is
   * above the account's quota. @default DEFAULT_BUILD_CONCURRENCY_QUOTA (the lowest a new account has)
   */
  readonly buildConcurrencyQuota: number;
  /** Claim lease in seconds. @default each worker's timeout (a worker cannot outlive it) */
  readonly leaseSeconds?: number;
  readonly testRunnerTimeoutMinutes: number;
  /**
   * Keep what holds jobs or credentials (queues, DLQs, created secrets) when the stack is deleted.
   * The ledger table is always kept and deletion-protected. @default true
   */
  readonly retainOnDestroy: boolean;
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
/** The environment when `-c env` is not given. */
const DEFAULT_ENV = 'dev';
/**
 * `env`, the one setting given as cdk context only: it names the file the others come from. Used
 * for the reference page (docs/reference/configuration.md); loadConfig checks it with ENV_NAME.
 */
export const envSetting = z
  .string()
  .regex(ENV_NAME)
  .default(DEFAULT_ENV)
  .describe(
    'Context only. The environment name: the stack is AgentJobs-<env>, and the other settings come from config/<env>.json, which must exist. ' +
      'A misspelt name is refused, naming the known environments; a new environment is added by its file. Environments deploy side by side.',
  );
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/;
const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;
const positiveInt = z.coerce.number().int().positive();
const secretArn = z.string().regex(SECRET_ARN, 'must be a complete Secrets Manager secret ARN').optional();
const NEW_SECRET = 'Without it, the stack creates a secret holding a placeholder, for you to fill in.';
/** Context values arrive as strings: "true"/"false" are booleans (z.coerce.boolean would read "false" as true). */
const flag = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')], {
  error: 'must be true or false',
});

/**
 * Git hosts: a JSON list, or one comma-separated string (how a context value arrives). Each entry
 * a host name or name:port, never a loopback, link-local or metadata address (never dialled).
 */
const gitHostsSchema = z
  .union([z.array(z.string()), z.string().transform(gitHostList)], {
    error: 'must be a list of host names (or one comma-separated string)',
  })
  .superRefine((hosts, ctx) => {
    for (const host of hosts) {
      const problem = gitHostEntryProblem(host, false);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }
  });

const workerOverridesSchema = z.strictObject(
  Object.fromEntries(TUNABLE_KEYS.map((key) => [key, positiveInt.optional().describe(TUNABLE_SETTINGS[key])])),
);
const workerNames = allWorkers().map((w) => w.name);

export const configSchema = z
  .strictObject({
    workers: z
      .strictObject(Object.fromEntries(workerNames.map((name) => [name, workerOverridesSchema.optional()])))
      .optional()
      .describe("Per worker: overrides of the catalog's settings (contract/job-types.ts), by worker name."),
    alarmEmail: z.email().optional().describe('E-mail address subscribed to the alarm topic.'),
    gitCredentialsSecretArn: secretArn.describe(
      `Secrets Manager secret {"username","password"} the sequencer pushes to the workspace remotes with. ${NEW_SECRET}`,
    ),
    gitReadCredentialsSecretArn: secretArn.describe(
      'A read-only git credential of the same shape for test builds, or a GitHub App (each build then gets a token for its one repository). ' +
        `Test code never sees the push credential. ${NEW_SECRET}`,
    ),
    githubTokenSecretArn: secretArn.describe(
      `Secrets Manager secret holding a GitHub token (a plain string). ${NEW_SECRET}`,
    ),
    secretsKmsKeyArn: z
      .string()
      .regex(KMS_KEY_ARN, 'must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)')
      .optional()
      .describe(
        'Customer-managed KMS key that encrypts the secrets given by ARN. Their readers get kms:Decrypt through Secrets Manager, for those secrets only.',
      ),
    githubApiUrl: z
      .url({ protocol: /^https$/, error: 'must be an https URL' })
      .default(GITHUB_API_DEFAULT_URL)
      .describe('GitHub REST API base URL. GitHub Enterprise: https://<host>/api/v3.'),
    gitHosts: gitHostsSchema
      .default([])
      .describe(
        'The git hosts the sequencer may push to and fetch from: a list in the file, comma-separated as context. A name without a port allows any port. ' +
          'Loopback, link-local and metadata addresses are refused. With none, every repository is refused (HOST_NOT_ALLOWED), so cdk synth refuses it.',
      ),
    githubContentRequestsPerHour: positiveInt
      .default(GITHUB_CONTENT_LIMITS.perHour)
      .describe(
        "Pull requests opened an hour, all open_pr containers together (GitHub's secondary limit). Each container keeps to its share.",
      ),
    buildConcurrencyQuota: positiveInt
      .default(DEFAULT_BUILD_CONCURRENCY_QUOTA)
      .describe(
        'The account\'s Service Quotas value "Concurrently running builds for ARM/Small environment" (Linux/Small on x86). ' +
          "A build start beyond it waits. The default is the lowest a new account has: set your account's value.",
      ),
    leaseSeconds: positiveInt
      .optional()
      .describe(
        "How long a claim holds before another worker may take the job over. Without it, each worker's timeout.",
      ),
    testRunnerTimeoutMinutes: positiveInt
      .max(MAX_BUILD_TIMEOUT_MINUTES)
      .default(60)
      .describe("Default CodeBuild build timeout of the command stages. A job's timeoutSeconds overrides it."),
    retainOnDestroy: flag
      .default(true)
      .describe(
        'Keep the queues, DLQs and created secrets when the stack is deleted. The ledger table is always kept, with deletion protection.',
      ),
  })
  .refine(
    (c) =>
      c.secretsKmsKeyArn === undefined ||
      [c.gitCredentialsSecretArn, c.gitReadCredentialsSecretArn, c.githubTokenSecretArn].some(Boolean),
    {
      path: ['secretsKmsKeyArn'],
      message:
        'applies to secrets given by ARN only (the secrets the stack creates use the AWS-managed key): set a *SecretArn too, or remove it',
    },
  );

/**
 * Every setting an operator can give, as the README's configuration table names them (`<name>` is
 * a worker name). `env` is context only; every other one works from the file and from context.
 */
export const SETTING_NAMES: readonly string[] = [
  'env',
  ...TUNABLE_KEYS.map((key) => `workers.<name>.${key}`),
  ...Object.keys(configSchema.shape).filter((key) => key !== 'workers'),
];

/** Validates `input` (file and context values merged) for environment `envName`. Pure. */
export function resolveConfig(envName: string, input: unknown, source = 'input'): AgentJobsConfig {
  if (!ENV_NAME.test(envName)) {
    throw new InvalidConfigError(source, [
      `env = ${JSON.stringify(envName)}: must match ${ENV_NAME.source} (it is part of the stack name)`,
    ]);
  }
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    throw new InvalidConfigError(
      source,
      parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`),
    );
  }
  const { workers: overrides = {}, ...rest } = parsed.data;
  const workers = Object.fromEntries(
    allWorkers().map(({ name, settings }) => [name, { ...settings, ...overrides[name] }]),
  ) as Record<WorkerName, WorkerSettings>;
  return { envName, workers, ...rest };
}

/**
 * Reads `-c env=<name>` (default dev), `<configDir>/<name>.json`, and every setting given as cdk
 * context: a context key wins over the file, leaf by leaf. An environment must have its file: a
 * misspelt name (`-c env=prd`) would otherwise synthesize a stack of its own, `AgentJobs-prd`, on
 * the defaults. The file is how a new environment is asked for (`{}` takes every default).
 */
export function loadConfig(app: Construct, configDir: string): AgentJobsConfig {
  const envName: unknown = app.node.tryGetContext('env') ?? DEFAULT_ENV;
  if (typeof envName !== 'string') throw new InvalidConfigError('cdk context', ['env: must be a string']);
  // Only a valid env name reaches the file system (it becomes a path).
  if (!ENV_NAME.test(envName)) return resolveConfig(envName, {}, 'cdk context');
  const file = join(configDir, `${envName}.json`);
  if (!existsSync(file)) throw new InvalidConfigError('cdk context', [unknownEnvironment(envName, configDir)]);
  const fromFile = readJson(file);
  if (!isObject(fromFile)) throw new InvalidConfigError(file, ['(root): must be a JSON object']);
  const source = `${file} and cdk context`;
  const config = resolveConfig(envName, mergeSettings(fromFile, contextSettings(app)), source);
  // What is deployed dials real hosts only: with none allowed, the stack would refuse every repository.
  if (config.gitHosts.length === 0) throw new InvalidConfigError(source, [NO_GIT_HOSTS]);
  return config;
}

const NO_GIT_HOSTS =
  'gitHosts: none is configured, so every repository would be refused (HOST_NOT_ALLOWED): ' +
  'add "gitHosts": ["github.com"] (your git hosts) to the file, or -c gitHosts=github.com';

function unknownEnvironment(envName: string, configDir: string): string {
  const dir = basename(configDir);
  const known = existsSync(configDir)
    ? readdirSync(configDir)
        .filter((f) => f.endsWith('.json'))
        .map((f) => f.slice(0, -'.json'.length))
        .sort()
    : [];
  return (
    `env = ${JSON.stringify(envName)}: there is no ${dir}/${envName}.json (known environments: ${known.join(', ') || 'none'}). ` +
    `A new environment is asked for by its file: echo '{ "gitHosts": ["github.com"] }' > ${dir}/${envName}.json takes every other default`
  );
}

/** Context keys the CDK itself writes that carry neither `@` nor `:`. */
const CDK_CONTEXT_KEYS = new Set(['acknowledged-issue-numbers']);

/** Context keys of the CI trust stack (lib/ci-trust-stack.ts, read in bin/app.ts): not settings of the platform's stacks. */
export const CI_TRUST_CONTEXT_KEYS: ReadonlySet<string> = new Set([
  'githubRepo',
  'githubEnvironments',
  'githubBranches',
  'githubOidcProviderArn',
]);

/**
 * The context keys that are settings, as one nested object. The CDK's own keys (feature flags
 * `@aws-cdk/...`, `aws:cdk:...`, lookups `availability-zones:...`) are skipped; every other key is
 * a setting, so an unknown or misspelt one fails validation instead of being ignored.
 */
function contextSettings(app: Construct): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(app.node.getAllContext())) {
    if (key === 'env' || /[@:]/.test(key) || CDK_CONTEXT_KEYS.has(key) || CI_TRUST_CONTEXT_KEYS.has(key)) continue;
    setPath(settings, key.split('.'), value);
  }
  return settings;
}

function setPath(target: Record<string, unknown>, [head, ...rest]: string[], value: unknown): void {
  if (head === undefined) return;
  if (rest.length === 0) {
    target[head] = value;
    return;
  }
  const child = target[head];
  const next = isObject(child) ? child : {};
  target[head] = next;
  setPath(next, rest, value);
}

/** `override` wins leaf by leaf; objects merge, anything else replaces. */
function mergeSettings(base: Record<string, unknown>, override: Record<string, unknown>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) {
    const current = merged[key];
    merged[key] = isObject(current) && isObject(value) ? mergeSettings(current, value) : value;
  }
  return merged;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new InvalidConfigError(file, [`(root): not valid JSON: ${(error as Error).message}`]);
  }
}
