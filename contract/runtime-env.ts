/**
 * Names of the environment variables that the stack sets and the handlers read. One list, so a
 * grant in lib/ and the variable a handler reads cannot drift apart.
 */
export const ENV = {
  ledgerTable: 'LEDGER_TABLE_NAME',
  eventBus: 'EVENT_BUS_NAME',
  /** The FIFO queue's own DLQ (permanent failures are moved there by the handler). */
  dlqUrl: 'DLQ_URL',
  /** Stage queue URLs, one per staged job type: STAGE_QUEUE_URL_RUN_TESTS, ... */
  stageQueueUrlPrefix: 'STAGE_QUEUE_URL_',
  diffBucket: 'DIFF_BUCKET_NAME',
  gitCredentialsSecretArn: 'GIT_CREDENTIALS_SECRET_ARN',
  /** The read-only credential the command stages hand test builds (never read by the build itself). */
  gitReadCredentialsSecretArn: 'GIT_READ_CREDENTIALS_SECRET_ARN',
  /**
   * Where the command stages write each repository's checkout secret, the one thing a test build's
   * role may read (src/adapters/build-checkout.ts).
   */
  checkoutSecretPrefix: 'CHECKOUT_SECRET_PREFIX',
  githubTokenSecretArn: 'GITHUB_TOKEN_SECRET_ARN',
  githubApiUrl: 'GITHUB_API_URL',
  /**
   * Content-creating GitHub requests one open_pr container makes in any minute and in any hour: its
   * share of GitHub's secondary limits (contract/limits.ts contentShare, src/adapters/github-api.ts).
   */
  githubContentPerMinute: 'GITHUB_CONTENT_PER_MINUTE',
  githubContentPerHour: 'GITHUB_CONTENT_PER_HOUR',
  /** The git hosts the sequencer may dial, comma-separated (`gitHosts` of the configuration); unset: none. */
  gitHosts: 'GIT_HOSTS',
  testRunnerProject: 'TEST_RUNNER_PROJECT_NAME',
  /** Seconds a claim lease lasts before another worker may take the job over. */
  leaseSeconds: 'LEASE_SECONDS',
  /** Days a ledger record is kept (TTL); longer than the DLQ retention. */
  ledgerRetentionDays: 'LEDGER_RETENTION_DAYS',
  /** Deliveries SQS makes before its redrive policy moves a message to the DLQ. */
  maxReceiveCount: 'MAX_RECEIVE_COUNT',
  /**
   * The visibility timeout of the queue the function consumes, as deployed (the environment's
   * overrides applied): heartbeats extend a message's visibility to it.
   */
  visibilityTimeoutSeconds: 'VISIBILITY_TIMEOUT_SECONDS',
  /** The job type a stage function serves (the command-stage handler serves every command stage). */
  stageJobType: 'STAGE_JOB_TYPE',
  /** The command runner's default build timeout, used when a job names none. */
  buildTimeoutMinutes: 'BUILD_TIMEOUT_MINUTES',
  /** Stage DLQ URLs, one per command stage: where the completion path copies a failed job's message. */
  stageDlqUrlPrefix: 'STAGE_DLQ_URL_',
} as const;

/** GitHub's API, used when GITHUB_API_URL is not set (GitHub Enterprise: https://<host>/api/v3). */
export const GITHUB_API_DEFAULT_URL = 'https://api.github.com';

/**
 * Variables a command stage sets when it starts a build, and the CodeBuild buildspec reads. The
 * stage always sends TEST_COMMAND (the job's command or its stage's default), so the build never
 * needs a default of its own. JOB_ID, JOB_TYPE and JOB_RUN come back in the build's completion
 * event: they name the job it completes. JOB_RUN_KEY names this job's run apart from an earlier
 * job's sent under the same id (core/jobs/command-stage.ts runKey).
 */
export const TEST_BUILD_ENV = {
  repoUrl: 'REPO_URL',
  commitSha: 'COMMIT_SHA',
  testCommand: 'TEST_COMMAND',
  jobId: 'JOB_ID',
  jobType: 'JOB_TYPE',
  run: 'JOB_RUN',
  runKey: 'JOB_RUN_KEY',
} as const;

/**
 * Builds queue at most this long before CodeBuild times them out (the project's queued timeout):
 * part of how long a job may wait for its build's completion.
 */
export const BUILD_QUEUED_TIMEOUT_MINUTES = 60;
/**
 * A command stage's job is due for reconciliation this long after its build's queued timeout and
 * timeout have passed without a completion event (CodeBuild delivers events on a best-effort basis).
 */
export const BUILD_DUE_MARGIN_SECONDS = 15 * 60;
/**
 * After the completion path records a verdict it reports it (outcome event, DLQ copy); a job whose
 * report is still missing this long after is reported by the reconciler (a crashed reporter).
 */
export const REPORT_GRACE_SECONDS = 5 * 60;

/**
 * JSON keys of the git credentials secret, `{ "username": "...", "password": "<token>" }`: the
 * sequencer reads them to push, the test build's buildspec to fetch.
 */
export const GIT_CREDENTIAL_KEYS = { username: 'username', password: 'password' } as const;

/**
 * The build variables that carry the checkout credential: set at StartBuild by the command stage as
 * references to its repository's checkout secret (src/adapters/build-checkout.ts), read by the
 * buildspec (lib/constructs/test-runner.ts).
 */
export const CHECKOUT_ENV = { username: 'GIT_USERNAME', password: 'GIT_PASSWORD' } as const;

/**
 * What a secret the stack creates holds until the operator stores the credential: both keys of a
 * git credentials secret, the whole value of the GitHub token secret. Every reader refuses it with
 * a message naming the secret. Never change it: CloudFormation writes a secret again when its
 * template value changes, which would overwrite the credential stored in its place.
 */
export const SECRET_PLACEHOLDER = 'REPLACE_ME';

export function stageQueueUrlEnv(jobType: string): string {
  return `${ENV.stageQueueUrlPrefix}${jobType.toUpperCase()}`;
}

export function stageDlqUrlEnv(jobType: string): string {
  return `${ENV.stageDlqUrlPrefix}${jobType.toUpperCase()}`;
}

/** Source of events on the bus (EventBridge `source`). */
export const EVENT_SOURCE = 'agent-jobs';
export const EVENT_TYPES = ['AgentJobSucceeded', 'AgentJobFailed', 'AgentJobSkipped', 'WorkspaceBlocked'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** CloudWatch namespace of the custom metrics the handlers publish. */
export const METRICS_NAMESPACE = 'AgentJobs';
/** The `service` dimension every custom metric carries (Powertools adds it): alarms on a metric name it. */
export const METRICS_SERVICE = 'agent-jobs';
/**
 * Custom metrics (count, unit Count) the handlers publish in METRICS_NAMESPACE and the dashboard
 * graphs. Outcomes carry the dimension `jobType`.
 */
export const JOB_METRICS = {
  succeeded: 'JobSucceeded',
  failed: 'JobFailed',
  skipped: 'JobSkipped',
  forwarded: 'JobForwarded',
  /** A command stage started its build; the verdict follows by event. */
  running: 'JobRunning',
  workspaceBlocked: 'WorkspaceBlocked',
  /** Reconciler, each run: command-stage jobs past their due time, and the age of the oldest (seconds). */
  overdueBuilds: 'BuildsOverdue',
  oldestOverdueBuild: 'OldestOverdueBuildSeconds',
  /** Reconciler: jobs it completed or reported because their event never came or was not reported. */
  reconciled: 'BuildsReconciled',
  /** GitHub answered a request with a rate limit (primary or secondary): the job waits until GitHub's time. */
  githubRateLimited: 'GitHubRateLimited',
  /** A content-creating GitHub request waited for its turn in the platform's own pacing (no request was made). */
  githubPaced: 'GitHubRequestsPaced',
  /** A command stage's build was refused by the runner's concurrent-build quota: the job waits for a build to free up. */
  buildsWaitingForQuota: 'BuildsWaitingForQuota',
  /** A stage's requirement (catalog `requires`) had no verdict yet at its commit: the job waits and looks again. */
  jobsWaitingForRequirement: 'JobsWaitingForRequirement',
  /** Secrets Manager throttled (or refused over a quota) a build start's checkout secret: the job waits and starts its build later. */
  checkoutSecretsThrottled: 'CheckoutSecretsThrottled',
} as const;
export type JobMetricName = (typeof JOB_METRICS)[keyof typeof JOB_METRICS];

/** Inline diffs larger than this travel as a diffRef (S3 claim-check). Leaves room under 1 MiB for the envelope. */
export const INLINE_DIFF_LIMIT_BYTES = 200 * 1024;
/** Largest diff accepted at all (inline or by reference). */
export const MAX_DIFF_BYTES = 20 * 1024 * 1024;
/** SQS maximum message size set explicitly on every queue (1 MiB). */
export const MAX_MESSAGE_BYTES = 1_048_576;
