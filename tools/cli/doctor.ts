/**
 * `agent-jobs doctor`: the smoke check an operator runs after `cdk deploy` (or after starting the
 * local platform). Each check answers one question and says why when the answer is no:
 *
 * - outputs: is every stack output there, and does the resource it names answer? (A function's log
 *   group too: `agent-jobs logs` links to it.)
 * - alarm notification: does an alarm's notification reach the SNS topic? (One alarm is set to
 *   ALARM; CloudWatch's alarm history then records whether its SNS action succeeded.)
 * - secrets: does every secret hold its documented shape, not the stack's placeholder? (Read with
 *   the same parsers the functions use; a value is never printed.)
 * - GitHub App: when a secret holds one, is it installed on the repository (`--repo`) with
 *   `contents: write` and `pull_requests: write`?
 * - end-to-end job: does one apply_patch and its run_tests go through, on a scratch workspace? It
 *   takes away what it leaves (failed jobs off the DLQs, a test run still running, a fenced
 *   workspace) whatever the outcome.
 *
 * The checks take their clients and their clock as arguments; tools/cli/commands/doctor.ts wires the
 * real ones.
 */
import {
  CloudFormationClient,
  DescribeStacksCommand,
  ListStackResourcesCommand,
  type Output,
} from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmHistoryCommand, SetAlarmStateCommand } from '@aws-sdk/client-cloudwatch';
import { CloudWatchLogsClient, DescribeLogGroupsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { BatchGetProjectsCommand, CodeBuildClient } from '@aws-sdk/client-codebuild';
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DescribeEventBusCommand, EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetTopicAttributesCommand, SNSClient } from '@aws-sdk/client-sns';
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import {
  BUILD_RECONCILER_LOG_GROUP_OUTPUT,
  STACK_OUTPUTS,
  dlqUrlOutputKey,
  logGroupOutputKey,
  queueUrlOutputKey,
} from '../../contract/stack-outputs';
import { GITHUB_API_DEFAULT_URL } from '../../contract/runtime-env';
import { platformQueues } from '../../contract/topology';
import { isGitHubAppKey, parseRepoUrl, type GitHubAppKey } from '../../src/adapters/github-api';
import {
  appInstallation,
  appOctokit,
  missingPermissions,
  REQUIRED_APP_PERMISSIONS,
} from '../../src/adapters/github-app';
import { parseGitCredentials, parseGithubToken } from '../../src/adapters/secrets';
import type { JobRequest } from '../../src/client/producer';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { cancelRule } from '../../src/core/ledger';
import { TERMINAL_STATUSES, type JobRecord } from '../../src/core/ports';
import { platformRepositoryOf } from '../local/state-dir';
import type { Connection } from '../operator/connection';
import { dismissJob } from '../operator/dlq';
import { cancelJob } from '../operator/jobs';
import { unblockWorkspace } from '../operator/workspaces';
import { TargetError } from '../operator/errors';
import type { TestIsolation } from '../operator/targets';

/** `warn`: works, but less safely than it could (the exit code stays 0). */
export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  readonly check: string;
  readonly status: CheckStatus;
  /** Why, in one line; never a secret's value. */
  readonly detail: string;
}

type Sends<T extends { send: unknown }> = Pick<T, 'send'>;

const execFileP = promisify(execFile);

export interface StackClients {
  readonly cloudFormation: Sends<CloudFormationClient>;
  readonly cloudWatch: Sends<CloudWatchClient>;
  readonly logs: Sends<CloudWatchLogsClient>;
  readonly secretsManager: Sends<SecretsManagerClient>;
  readonly sns: Sends<SNSClient>;
  readonly codeBuild: Sends<CodeBuildClient>;
  readonly eventBridge: Sends<EventBridgeClient>;
  readonly sqs: Sends<SQSClient>;
  readonly dynamodb: Sends<DynamoDBClient>;
  readonly s3: Sends<S3Client>;
}

export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const message = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : String(error);

async function probe(check: string, run: () => Promise<string>): Promise<CheckResult> {
  try {
    return { check, status: 'pass', detail: await run() };
  } catch (error) {
    return { check, status: 'fail', detail: message(error) };
  }
}

// ---- local test isolation ---------------------------------------------------------------------

export const TEST_ISOLATION_CHECK = 'test command isolation (local platform)';

/**
 * What the running local platform said at start about how it isolates test commands: a warning
 * when it is below the full sandbox, naming what is missing.
 */
export function checkTestIsolation(report: TestIsolation | undefined): CheckResult {
  if (report === undefined)
    return {
      check: TEST_ISOLATION_CHECK,
      status: 'skip',
      detail: 'the running platform does not say (started by an older version)',
    };
  const detail = `${report.summary}. Stops: ${report.stops.join('; ')}. Does not stop: ${report.doesNotStop.join('; ')}.`;
  return report.degraded
    ? { check: TEST_ISOLATION_CHECK, status: 'warn', detail: `${report.degraded}. ${detail}` }
    : { check: TEST_ISOLATION_CHECK, status: 'pass', detail };
}

// ---- outputs -----------------------------------------------------------------------------------

/** The output keys an agent-jobs stack has per queue: its URLs, and its worker's log group (the build reconciler's beside the build-events queue). */
interface QueueOutputKeys {
  readonly queues: ReadonlySet<string>;
  readonly logGroups: ReadonlySet<string>;
}

function queueOutputKeys(): QueueOutputKeys {
  const queues = platformQueues();
  return {
    queues: new Set(queues.flatMap((q) => [queueUrlOutputKey(q.name), dlqUrlOutputKey(q.name)])),
    logGroups: new Set([
      ...queues.map((q) => logGroupOutputKey(q.consumer)),
      ...(queues.some((q) => q.role === 'buildEvents') ? [BUILD_RECONCILER_LOG_GROUP_OUTPUT] : []),
    ]),
  };
}

/** Every output key an agent-jobs stack has: its queues' URLs, its functions' log groups and the shared resources. */
export function expectedOutputKeys(keys: QueueOutputKeys = queueOutputKeys()): string[] {
  return [...keys.queues, ...keys.logGroups, ...Object.values(STACK_OUTPUTS)];
}

const SECRET_OUTPUTS: readonly string[] = [
  STACK_OUTPUTS.gitCredentialsSecretArn,
  STACK_OUTPUTS.gitReadCredentialsSecretArn,
  STACK_OUTPUTS.githubTokenSecretArn,
];

/** How to ask the resource an output names whether it is there. */
function probeFor(key: string, value: string, clients: StackClients, keys: QueueOutputKeys): () => Promise<string> {
  if (keys.queues.has(key)) {
    return async () => {
      const out = await clients.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: value, AttributeNames: ['ApproximateNumberOfMessages'] }),
      );
      return `queue answers (${out.Attributes?.ApproximateNumberOfMessages ?? '?'} messages visible)`;
    };
  }
  if (keys.logGroups.has(key)) {
    return async () => {
      // Names come sorted: the group itself, when it exists, comes before any other with its name as prefix.
      const { logGroups = [] } = await clients.logs.send(
        new DescribeLogGroupsCommand({ logGroupNamePrefix: value, limit: 1 }),
      );
      const group = logGroups.find((g) => g.logGroupName === value);
      if (group === undefined) throw new Error(`log group ${value} not found`);
      return `log group answers, retention ${group.retentionInDays === undefined ? 'never expires' : `${group.retentionInDays} days`}`;
    };
  }
  switch (key) {
    case STACK_OUTPUTS.ledgerTableName:
      return async () => {
        const { Table: table } = await clients.dynamodb.send(new DescribeTableCommand({ TableName: value }));
        if (table?.TableStatus !== 'ACTIVE') throw new Error(`table ${value} is ${table?.TableStatus ?? 'missing'}`);
        return `table ACTIVE, deletion protection ${table.DeletionProtectionEnabled ? 'on' : 'OFF'}`;
      };
    case STACK_OUTPUTS.eventBusName:
      return async () =>
        `event bus ${(await clients.eventBridge.send(new DescribeEventBusCommand({ Name: value }))).Name ?? value} answers`;
    case STACK_OUTPUTS.diffBucketName:
      return async () => {
        await clients.s3.send(new HeadBucketCommand({ Bucket: value }));
        return 'bucket answers';
      };
    case STACK_OUTPUTS.alarmTopicArn:
      return async () => {
        const { Attributes: attributes = {} } = await clients.sns.send(
          new GetTopicAttributesCommand({ TopicArn: value }),
        );
        return `topic answers, ${attributes['SubscriptionsConfirmed'] ?? '0'} confirmed subscription(s)`;
      };
    case STACK_OUTPUTS.testRunnerProjectName:
      return async () => {
        const { projects = [] } = await clients.codeBuild.send(new BatchGetProjectsCommand({ names: [value] }));
        if (projects.length !== 1) throw new Error(`CodeBuild project ${value} not found`);
        return 'CodeBuild project answers';
      };
    default:
      if (SECRET_OUTPUTS.includes(key)) return async () => 'read by the secrets check';
      return async () => 'not an output of agent-jobs: nothing to check';
  }
}

/** One result per expected output: present, and its resource answers. */
export async function checkOutputs(outputs: readonly Output[], clients: StackClients): Promise<CheckResult[]> {
  const byKey = new Map(
    outputs.flatMap((o) => (o.OutputKey && o.OutputValue ? [[o.OutputKey, o.OutputValue] as const] : [])),
  );
  const keys = queueOutputKeys();
  return Promise.all(
    expectedOutputKeys(keys).map((key) => {
      const value = byKey.get(key);
      if (value === undefined)
        return {
          check: `output ${key}`,
          status: 'fail' as const,
          detail: 'missing from the stack outputs (an older or a different stack?)',
        };
      return probe(`output ${key}`, probeFor(key, value, clients, keys));
    }),
  );
}

// ---- alarm notification ------------------------------------------------------------------------

export interface AlarmCheckOptions {
  readonly stackName: string;
  readonly topicArn: string;
  readonly clients: Pick<StackClients, 'cloudFormation' | 'cloudWatch'>;
  readonly clock: Clock;
  /** How long to wait for the alarm history to show the action. @default 120 000 */
  readonly timeoutMs?: number;
  /** @default 5 000 */
  readonly pollMs?: number;
}

/** The stack's alarms, DLQ depth alarms first (the least surprising one to see fire). */
async function stackAlarms(stackName: string, cloudFormation: Sends<CloudFormationClient>): Promise<string[]> {
  const alarms: { logicalId: string; name: string }[] = [];
  let nextToken: string | undefined;
  do {
    const page = await cloudFormation.send(
      new ListStackResourcesCommand({ StackName: stackName, NextToken: nextToken }),
    );
    for (const r of page.StackResourceSummaries ?? []) {
      if (r.ResourceType === 'AWS::CloudWatch::Alarm' && r.PhysicalResourceId && r.LogicalResourceId)
        alarms.push({ logicalId: r.LogicalResourceId, name: r.PhysicalResourceId });
    }
    nextToken = page.NextToken;
  } while (nextToken);
  const rank = (logicalId: string) => (logicalId.includes('DlqDepthAlarm') ? 0 : 1);
  return alarms.sort((a, b) => rank(a.logicalId) - rank(b.logicalId)).map((a) => a.name);
}

/** What one alarm-history Action item says about the SNS action: succeeded, failed (why), or not about it. */
function actionOutcome(
  item: { HistorySummary?: string; HistoryData?: string },
  topicArn: string,
): { ok: boolean; why: string } | undefined {
  const summary = item.HistorySummary ?? '';
  let data: { actionState?: unknown; notificationResource?: unknown } = {};
  try {
    data = JSON.parse(item.HistoryData ?? '{}') as typeof data;
  } catch {
    // the summary alone decides
  }
  if (!summary.includes(topicArn) && data.notificationResource !== topicArn) return undefined;
  const ok = data.actionState === 'Succeeded' || summary.startsWith('Successfully executed action');
  return { ok, why: summary || JSON.stringify(data) };
}

/**
 * Sets one of the stack's alarms to ALARM and waits for its history to record the SNS action:
 * "Successfully executed action <topic>" means CloudWatch published (the topic policy and its key
 * let it). The alarm is set back to OK afterwards; CloudWatch re-evaluates it at its next period.
 */
const ALARM_CHECK = 'alarm notification reaches the topic';

export async function checkAlarmNotification(options: AlarmCheckOptions): Promise<CheckResult> {
  const check = ALARM_CHECK;
  const { cloudWatch, cloudFormation } = options.clients;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const pollMs = options.pollMs ?? 5_000;
  let alarm: string | undefined;
  try {
    alarm = (await stackAlarms(options.stackName, cloudFormation))[0];
    if (!alarm) return { check, status: 'fail', detail: `stack ${options.stackName} has no CloudWatch alarm` };
    const started = new Date(options.clock.now() - 1_000);
    await cloudWatch.send(
      new SetAlarmStateCommand({
        AlarmName: alarm,
        StateValue: 'ALARM',
        StateReason: 'agent-jobs doctor: test notification, nothing is wrong',
      }),
    );
    const deadline = options.clock.now() + timeoutMs;
    let last = 'no action recorded yet';
    for (;;) {
      const { AlarmHistoryItems: items = [] } = await cloudWatch.send(
        new DescribeAlarmHistoryCommand({
          AlarmName: alarm,
          HistoryItemType: 'Action',
          StartDate: started,
          ScanBy: 'TimestampDescending',
        }),
      );
      const outcome = items.map((item) => actionOutcome(item, options.topicArn)).find((o) => o !== undefined);
      if (outcome) return { check, status: outcome.ok ? 'pass' : 'fail', detail: `${alarm}: ${outcome.why}` };
      if (items.length > 0) last = `actions recorded, none for ${options.topicArn}: ${items[0]?.HistorySummary ?? ''}`;
      if (options.clock.now() >= deadline)
        return { check, status: 'fail', detail: `${alarm}: after ${timeoutMs / 1000} s, ${last}` };
      await options.clock.sleep(pollMs);
    }
  } catch (error) {
    return { check, status: 'fail', detail: `${alarm ?? options.stackName}: ${message(error)}` };
  } finally {
    if (alarm) {
      try {
        await cloudWatch.send(
          new SetAlarmStateCommand({
            AlarmName: alarm,
            StateValue: 'OK',
            StateReason: 'agent-jobs doctor: test notification over',
          }),
        );
      } catch {
        // Harmless: CloudWatch sets the state from the metric again at the alarm's next period.
      }
    }
  }
}

// ---- secrets -----------------------------------------------------------------------------------

/** Each secret output holds the shape its readers parse, not the placeholder; never prints a value. */
export async function checkSecrets(
  outputs: readonly Output[],
  secretsManager: Sends<SecretsManagerClient>,
): Promise<CheckResult[]> {
  const byKey = new Map(
    outputs.flatMap((o) => (o.OutputKey && o.OutputValue ? [[o.OutputKey, o.OutputValue] as const] : [])),
  );
  const parsers: Record<string, (raw: unknown, secret: string) => unknown> = {
    [STACK_OUTPUTS.gitCredentialsSecretArn]: parseGitCredentials,
    [STACK_OUTPUTS.gitReadCredentialsSecretArn]: parseGitCredentials,
    [STACK_OUTPUTS.githubTokenSecretArn]: parseGithubToken,
  };
  return Promise.all(
    Object.entries(parsers).map(async ([key, parse]) => {
      const check = `secret ${key}`;
      const arn = byKey.get(key);
      if (!arn) return { check, status: 'fail' as const, detail: 'missing from the stack outputs' };
      return probe(check, async () => {
        const { SecretString: value } = await secretsManager.send(new GetSecretValueCommand({ SecretId: arn }));
        parse(value, arn);
        return `${arn} holds the documented shape`;
      });
    }),
  );
}

// ---- GitHub App ----------------------------------------------------------------------------------

export interface GitHubAppCheckOptions {
  readonly outputs: readonly Output[];
  readonly secretsManager: Sends<SecretsManagerClient>;
  /** The repository the platform works on (`--repo`); none: the check is skipped. */
  readonly repoUrl?: string;
  /** GitHub's REST API (the stack's githubApiUrl). */
  readonly githubApiUrl: string;
}

/**
 * For each GitHub App the push or the token secret holds: is it installed on the repository, as
 * the installation the secret names (if any), with the permissions the platform needs? Nothing
 * when no secret holds an app (a malformed secret is the secrets check's to report).
 */
export async function checkGitHubApps(options: GitHubAppCheckOptions): Promise<CheckResult[]> {
  const byKey = new Map(
    options.outputs.flatMap((o) => (o.OutputKey && o.OutputValue ? [[o.OutputKey, o.OutputValue] as const] : [])),
  );
  const readers: [string, (raw: unknown, secret: string) => unknown][] = [
    [STACK_OUTPUTS.gitCredentialsSecretArn, parseGitCredentials],
    [STACK_OUTPUTS.githubTokenSecretArn, parseGithubToken],
  ];
  const apps = new Map<string, GitHubAppKey>();
  for (const [key, parse] of readers) {
    const arn = byKey.get(key);
    if (!arn) continue;
    const value = await secretString(options, arn)
      .then((raw) => parse(raw, arn))
      .catch(() => undefined);
    if (isGitHubAppKey(value)) apps.set(`${value.appId}/${value.installationId ?? ''}`, value);
  }
  return Promise.all(
    [...apps.values()].map(async (app): Promise<CheckResult> => {
      const check = `GitHub App ${app.appId}`;
      if (options.repoUrl === undefined)
        return { check, status: 'skip', detail: 'pass --repo to check its installation on the repository' };
      const repository = parseRepoUrl(options.repoUrl);
      return probe(check, async () => {
        const installation = await appInstallation(appOctokit(app, options.githubApiUrl), repository);
        const on = `${repository.owner}/${repository.repo}`;
        if (app.installationId !== undefined && app.installationId !== installation.id) {
          throw new Error(
            `the secret names installation ${app.installationId}, but ${on} is reached by installation ${installation.id}`,
          );
        }
        const missing = missingPermissions(installation);
        if (missing.length > 0)
          throw new Error(
            `installation ${installation.id} on ${on} lacks ${missing.join(', ')}: grant it in the app's settings, then accept the new permissions on the installation`,
          );
        return `installed on ${on} (installation ${installation.id}) with ${Object.entries(REQUIRED_APP_PERMISSIONS)
          .map(([name, level]) => `${name}: ${level}`)
          .join(', ')}`;
      });
    }),
  );
}

async function secretString(options: GitHubAppCheckOptions, arn: string): Promise<string | undefined> {
  return (await options.secretsManager.send(new GetSecretValueCommand({ SecretId: arn }))).SecretString;
}

// ---- end-to-end job ----------------------------------------------------------------------------

/** The branch the end-to-end job commits to when --branch does not name one. */
export const DOCTOR_BRANCH = 'agent-jobs-doctor';

/** One run of the end-to-end check: its workspace and its jobs, which it takes away when it ends. */
export interface DoctorRun {
  readonly workspaceId: string;
  readonly jobIds: readonly string[];
}

export interface JobCheckOptions {
  /** A repository the platform may push to, and a scratch branch of it that may receive a commit. */
  readonly repoUrl: string;
  readonly branch: string;
  readonly send: (job: JobRequest) => Promise<unknown>;
  readonly getJob: (jobId: string) => Promise<JobRecord | undefined>;
  readonly clock: Clock;
  /** Makes what the run needs before it sends (the local platform's scratch branch); says what it made. */
  readonly prepare?: () => Promise<string | undefined>;
  /** Takes what the run left away (failed jobs off the DLQs, a fenced workspace), whatever its outcome; says what it did. */
  readonly cleanUp: (run: DoctorRun) => Promise<string | undefined>;
  /** @default 900 000 (a CodeBuild build starts in a minute or two) */
  readonly timeoutMs?: number;
  /** @default 2 000 */
  readonly pollMs?: number;
}

/** A unified diff that adds one file: what an agent's first patch to a scratch workspace looks like. */
export function newFileDiff(file: string, line: string): string {
  return [
    `diff --git a/${file} b/${file}`,
    'new file mode 100644',
    '--- /dev/null',
    `+++ b/${file}`,
    '@@ -0,0 +1 @@',
    `+${line}`,
    '',
  ].join('\n');
}

const JOB_CHECK = 'end-to-end job on a scratch workspace';

/**
 * Sends one apply_patch (adding `.agent-jobs-doctor/<run>.txt` to the scratch branch) and one
 * run_tests that checks the file is there, on a workspace of their own, and waits for both: the
 * queue, the sequencer, the git push credential, the pin, the stage queue, the test runner with
 * its read-only credential, the ledger and the events all take part. Whatever the outcome (a
 * failure, a timeout, an interruption: the clock's sleep rejects), `cleanUp` takes what the run
 * left away, so a smoke check leaves no DLQ message, alarm or fenced workspace behind.
 */
export async function checkJobEndToEnd(options: JobCheckOptions): Promise<CheckResult> {
  const run = `doctor-${options.clock.now().toString(36)}`;
  const file = `.agent-jobs-doctor/${run}.txt`;
  const ids = { patch: `${run}-patch`, tests: `${run}-tests` };
  const common = { workspaceId: run, tenantId: 'agent-jobs-doctor' };
  let prepared: string | undefined;
  try {
    prepared = await options.prepare?.();
  } catch (error) {
    return {
      check: JOB_CHECK,
      status: 'fail',
      detail: `could not prepare branch ${options.branch}: ${message(error)}`,
    };
  }
  let outcome: CheckResult;
  try {
    outcome = await sendAndWait(options, run, file, ids, common);
  } catch (error) {
    outcome = {
      check: JOB_CHECK,
      status: 'fail',
      detail: `workspace ${run}: ${isAbort(error) ? 'interrupted' : message(error)}`,
    };
  }
  let cleaned: string | undefined;
  try {
    cleaned = await options.cleanUp({ workspaceId: run, jobIds: [ids.patch, ids.tests] });
  } catch (error) {
    cleaned = `clean-up failed: ${message(error)}`;
  }
  const detail = [prepared, outcome.detail, cleaned].filter(Boolean).join('; ');
  return { ...outcome, detail };
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

async function sendAndWait(
  options: JobCheckOptions,
  run: string,
  file: string,
  ids: { patch: string; tests: string },
  common: { workspaceId: string; tenantId: string },
): Promise<CheckResult> {
  const check = JOB_CHECK;
  try {
    await options.send({
      ...common,
      jobId: ids.patch,
      type: 'apply_patch',
      payload: {
        repo: { url: options.repoUrl, branch: options.branch },
        diff: newFileDiff(file, `agent-jobs doctor ${run}`),
        message: `agent-jobs doctor: smoke check ${run}`,
      },
    });
    await options.send({ ...common, jobId: ids.tests, type: 'run_tests', payload: { command: `test -f '${file}'` } });
  } catch (error) {
    return { check, status: 'fail', detail: `could not enqueue: ${message(error)}` };
  }
  const timeoutMs = options.timeoutMs ?? 900_000;
  const deadline = options.clock.now() + timeoutMs;
  let jobs: (JobRecord | undefined)[] = [];
  for (;;) {
    jobs = await Promise.all([options.getJob(ids.patch), options.getJob(ids.tests)]);
    if (jobs.every((j) => j && TERMINAL_STATUSES.includes(j.status)) || options.clock.now() >= deadline) break;
    await options.clock.sleep(options.pollMs ?? 2_000);
  }
  const [patch, tests] = jobs;
  if (patch?.status === 'SUCCEEDED' && tests?.status === 'SUCCEEDED' && tests.result?.['verdict'] === 'passed') {
    return {
      check,
      status: 'pass',
      detail: `workspace ${run}: ${ids.patch} committed ${String(patch.result?.['commitSha'] ?? '?').slice(0, 12)}, ${ids.tests} passed`,
    };
  }
  if (patch?.error?.reason === 'BRANCH_NOT_FOUND') {
    // The one thing the operator must make: said with the command that makes it.
    return {
      check,
      status: 'fail',
      detail: `workspace ${run}: branch ${options.branch} does not exist on ${options.repoUrl}: create it with "git push ${options.repoUrl} HEAD:refs/heads/${options.branch}" from a clone of the repository, then run doctor again`,
    };
  }
  const state = (id: string, job: JobRecord | undefined) =>
    `${id} ${job?.status ?? 'not in the ledger'}${job?.error ? ` (${job.error.reason}: ${job.error.message})` : ''}`;
  const timedOut = options.clock.now() >= deadline ? `after ${timeoutMs / 1000} s: ` : '';
  const verdict = tests?.status === 'SUCCEEDED' ? ` (tests ${String(tests.result?.['verdict'])})` : '';
  return {
    check,
    status: 'fail',
    detail: `workspace ${run}: ${timedOut}${state(ids.patch, patch)}, ${state(ids.tests, tests)}${verdict}`,
  };
}

/** The doctor's name in the ledger, as the one who dismissed its own failed jobs. */
const DOCTOR_ACTOR = 'agent-jobs doctor';

/**
 * What a run leaves behind, taken away with the operator's own commands: a FAILED job is dismissed
 * (its DLQ copy removed), one `cancel` applies to cancelled (cancelRule: one not started, a skipped
 * one's copy removed; a running run_tests, its build stopped), and its workspace, if fenced,
 * unblocked. What `cancel` refuses (a started apply_patch) is left to end on its own, said with
 * why; its commit on the scratch branch stays, as the check's evidence.
 */
export async function cleanUpScratchRun(connection: Connection, run: DoctorRun): Promise<string | undefined> {
  const ledger = await connection.ledger();
  const done: string[] = [];
  for (const jobId of run.jobIds) {
    const job = await ledger.getJob(jobId);
    if (
      job === undefined ||
      (TERMINAL_STATUSES.includes(job.status) && job.status !== 'FAILED' && job.status !== 'SKIPPED')
    )
      continue;
    try {
      const now = Date.now();
      const rule = job.status === 'FAILED' ? undefined : cancelRule(job, now);
      if (rule === undefined) {
        if (job.dismissed === undefined)
          await dismissJob(connection, jobId, {
            by: DOCTOR_ACTOR,
            reason: `smoke check ${run.workspaceId}: the doctor cleans up after itself`,
          });
        done.push(`${jobId} dismissed`);
      } else if (rule.kind === 'refused') {
        done.push(`${jobId} left ${job.status} (${rule.why}; "dlq dismiss ${jobId}" if it fails)`);
      } else {
        const { effect } = await cancelJob(connection, jobId, now);
        // A stopped build is worth saying; a job that never started just never runs.
        done.push(`${jobId} cancelled${rule.kind === 'stopBuild' ? ` (${effect})` : ''}`);
      }
    } catch (error) {
      done.push(`${jobId} left ${job.status} (${message(error)})`);
    }
  }
  if ((await ledger.getWorkspace(run.workspaceId))?.state === 'BLOCKED') {
    await unblockWorkspace(connection, run.workspaceId, 'drop');
    done.push(`workspace ${run.workspaceId} unblocked`);
  }
  return done.length ? `cleaned up: ${done.join(', ')}` : undefined;
}

/**
 * On the local platform the doctor makes its scratch branch itself, at the repository's HEAD,
 * when the repository is one of the platform's and lacks it (created only if still absent: `git
 * update-ref` with an empty old value). Elsewhere the job finds out, and the check says what to make.
 */
export async function ensureLocalBranch(
  stateDir: string,
  repoUrl: string,
  branch: string,
): Promise<string | undefined> {
  const gitDir = platformRepositoryOf(stateDir, repoUrl);
  if (gitDir === undefined) return undefined;
  const git = (...args: string[]) => execFileP('git', ['--git-dir', gitDir, ...args], { encoding: 'utf8' });
  const ref = `refs/heads/${branch}`;
  await git('check-ref-format', ref).catch(() => {
    throw new Error(`"${branch}" is not a valid branch name`);
  });
  if (
    await git('rev-parse', '--verify', '--quiet', ref).then(
      () => true,
      () => false,
    )
  )
    return undefined;
  const head = (await git('rev-parse', '--verify', 'HEAD^{commit}')).stdout.trim();
  await git('update-ref', ref, head, '');
  return `created branch ${branch} at ${head.slice(0, 12)}`;
}

// ---- a deployed stack ----------------------------------------------------------------------------

/** The clients of the AWS checks: the CLI's SQS and S3 for the target, one client per other service. */
export function stackClients(
  region: string,
  shared: Pick<StackClients, 'sqs' | 's3'>,
): StackClients & { destroy(): void } {
  const config = { region };
  const owned = {
    cloudFormation: new CloudFormationClient(config),
    cloudWatch: new CloudWatchClient(config),
    logs: new CloudWatchLogsClient(config),
    secretsManager: new SecretsManagerClient(config),
    sns: new SNSClient(config),
    codeBuild: new CodeBuildClient(config),
    eventBridge: new EventBridgeClient(config),
    dynamodb: new DynamoDBClient(config),
  };
  return { ...owned, ...shared, destroy: () => Object.values(owned).forEach((client) => client.destroy()) };
}

export interface StackCheckOptions {
  readonly stackName: string;
  readonly clients: StackClients;
  readonly clock: Clock;
  readonly skipAlarm: boolean;
  /** The repository of the end-to-end job, where a GitHub App's installation is checked. */
  readonly repoUrl?: string;
  /** @default GITHUB_API_DEFAULT_URL */
  readonly githubApiUrl?: string;
}

/** Outputs, alarm notification, secrets and GitHub Apps of a deployed stack, in that order. */
export async function checkStack(options: StackCheckOptions): Promise<CheckResult[]> {
  const { stackName, clients } = options;
  const { Stacks: [stack] = [] } = await clients.cloudFormation.send(
    new DescribeStacksCommand({ StackName: stackName }),
  );
  if (!stack) throw new TargetError(`stack ${stackName} not found`);
  const outputs = stack.Outputs ?? [];
  const topicArn = outputs.find((o) => o.OutputKey === STACK_OUTPUTS.alarmTopicArn)?.OutputValue ?? '';
  const [outputResults, alarm, secrets, apps] = await Promise.all([
    checkOutputs(outputs, clients),
    options.skipAlarm
      ? { check: ALARM_CHECK, status: 'skip' as const, detail: 'skipped (--skip-alarm)' }
      : checkAlarmNotification({ stackName, topicArn, clients, clock: options.clock }),
    checkSecrets(outputs, clients.secretsManager),
    checkGitHubApps({
      outputs,
      secretsManager: clients.secretsManager,
      githubApiUrl: options.githubApiUrl ?? GITHUB_API_DEFAULT_URL,
      ...(options.repoUrl !== undefined && { repoUrl: options.repoUrl }),
    }),
  ]);
  return [...outputResults, alarm, ...secrets, ...apps];
}
