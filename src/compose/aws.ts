/**
 * The one way the Lambda handlers build their dependencies on AWS: settings read from the
 * environment the stack sets (a missing or malformed one throws ConfigurationError naming it),
 * module-scope SDK clients (created once per container, pointed at AWS_ENDPOINT_URL when set, e.g.
 * LocalStack), and the adapters each worker needs.
 */
import { CodeBuildClient } from '@aws-sdk/client-codebuild';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Octokit } from '@octokit/rest';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import * as os from 'node:os';
import * as path from 'node:path';
import { JOB_TYPES, SEQUENCER, type StagedJobType, type WorkerSettings } from '../../contract/job-types';
import { ENV, GITHUB_API_DEFAULT_URL, stageQueueUrlEnv } from '../../contract/runtime-env';
import { VISIBILITY_TIMEOUT_FACTOR } from '../../contract/topology';
import { ConfigurationError } from '../core/errors';
import { applyPatchProcessor } from '../core/jobs/apply-patch';
import type { OpenPrDeps } from '../core/jobs/open-pr';
import type { RunTestsDeps } from '../core/jobs/run-tests';
import { DEFAULT_BACKOFF, type PipelineDeps, type PipelineSettings } from '../core/pipeline';
import type { Consumer } from '../core/ports';
import type { SequencerDeps } from '../core/sequencer';
import { CodeBuildTestRunner } from '../adapters/codebuild-test-runner';
import { S3DiffStore } from '../adapters/diff-store';
import { DynamoDbLedger } from '../adapters/dynamodb-ledger';
import { EventBridgePublisher } from '../adapters/events';
import { IsomorphicGitWorkspace } from '../adapters/git';
import { GitHubPullRequestHost, octokitLog } from '../adapters/github-pr-host';
import { logger, powertoolsJobMetrics } from '../adapters/powertools';
import { SecretsManagerSecrets } from '../adapters/secrets';
import { SqsQueueOps } from '../adapters/sqs-queue-ops';
import { randomOwner, systemClock } from '../adapters/system';

export function requireEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') throw new ConfigurationError(`environment variable ${name} is not set`);
  return value;
}

export function positiveIntEnv(name: string, env: NodeJS.ProcessEnv = process.env): number {
  const raw = requireEnv(name, env);
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new ConfigurationError(`environment variable ${name} must be a positive integer, got "${raw}"`);
  return value;
}

/** The pipeline settings of a worker, from the environment the stack sets for it. */
export function pipelineSettingsFromEnv(consumer: Consumer, worker: WorkerSettings, env: NodeJS.ProcessEnv = process.env): PipelineSettings {
  return {
    consumer,
    leaseSeconds: positiveIntEnv(ENV.leaseSeconds, env),
    maxReceiveCount: positiveIntEnv(ENV.maxReceiveCount, env),
    visibilitySeconds: worker.timeoutSeconds * VISIBILITY_TIMEOUT_FACTOR,
    backoff: DEFAULT_BACKOFF,
  };
}

/** SDK settings shared by every client: AWS_ENDPOINT_URL (LocalStack) when set, the SDK default chain otherwise. */
export function awsClientConfig(env: NodeJS.ProcessEnv = process.env): { endpoint?: string } {
  const endpoint = env['AWS_ENDPOINT_URL'];
  return endpoint ? { endpoint } : {};
}

function lazy<T>(create: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= create());
}

/** Module-scope clients, created on first use and reused by every invocation of the container. */
export const awsClients = {
  sqs: lazy(() => new SQSClient(awsClientConfig())),
  dynamodb: lazy(() => DynamoDBDocumentClient.from(new DynamoDBClient(awsClientConfig()), { marshallOptions: { removeUndefinedValues: true } })),
  s3: lazy(() => new S3Client({ ...awsClientConfig(), forcePathStyle: Boolean(process.env['AWS_ENDPOINT_URL']) })),
  eventBridge: lazy(() => new EventBridgeClient(awsClientConfig())),
  secretsManager: lazy(() => new SecretsManagerClient(awsClientConfig())),
  codeBuild: lazy(() => new CodeBuildClient(awsClientConfig())),
};

export function ledgerFromEnv(client: DynamoDBDocumentClient = awsClients.dynamodb(), env: NodeJS.ProcessEnv = process.env): DynamoDbLedger {
  return new DynamoDbLedger({ client, tableName: requireEnv(ENV.ledgerTable, env), retentionDays: positiveIntEnv(ENV.ledgerRetentionDays, env) });
}

/**
 * What every consumer shares on AWS: the ledger, its own DLQ, the event bus, metrics, logger,
 * clock and pipeline settings. The worker functions below add their own adapters on top.
 */
export function awsPipelineDeps(consumer: Consumer, worker: WorkerSettings, env: NodeJS.ProcessEnv = process.env): PipelineDeps {
  return {
    ledger: ledgerFromEnv(awsClients.dynamodb(), env),
    queueOps: new SqsQueueOps({ client: awsClients.sqs(), dlqUrl: requireEnv(ENV.dlqUrl, env) }),
    events: new EventBridgePublisher(awsClients.eventBridge(), requireEnv(ENV.eventBus, env)),
    metrics: powertoolsJobMetrics(),
    logger,
    clock: systemClock,
    newOwner: randomOwner,
    settings: pipelineSettingsFromEnv(consumer, worker, env),
  };
}

/** Stage queue URLs from STAGE_QUEUE_URL_<TYPE>, one per staged job type of the catalog. */
export function stageQueueUrlsFromEnv(read: (name: string) => string): Record<StagedJobType, string> {
  const staged = (Object.keys(JOB_TYPES) as (keyof typeof JOB_TYPES)[]).filter((t): t is StagedJobType => JOB_TYPES[t].lane === 'staged');
  return Object.fromEntries(staged.map((type) => [type, read(stageQueueUrlEnv(type))])) as Record<StagedJobType, string>;
}

/** Lambda's writable scratch space. */
export const SEQUENCER_WORK_ROOT = path.join(os.tmpdir(), 'agent-jobs');

/** The sequencer (the ordered lane's worker, deployed as the apply-patch function). */
export function awsSequencerDeps(env: NodeJS.ProcessEnv = process.env): SequencerDeps {
  const read = (name: string) => requireEnv(name, env);
  const secrets = new SecretsManagerSecrets({ client: awsClients.secretsManager(), gitCredentialsArn: read(ENV.gitCredentialsSecretArn) });
  const git = new IsomorphicGitWorkspace({ credentials: () => secrets.gitCredentials(), workRoot: SEQUENCER_WORK_ROOT, logger });
  return {
    ...awsPipelineDeps('sequencer', SEQUENCER, env),
    ordered: { apply_patch: applyPatchProcessor({ diffStore: new S3DiffStore(awsClients.s3(), read(ENV.diffBucket)), git }) },
    git,
    stageQueueUrls: stageQueueUrlsFromEnv(read),
  };
}

export function awsRunTestsDeps(env: NodeJS.ProcessEnv = process.env): RunTestsDeps {
  return {
    ...awsPipelineDeps('stage', JOB_TYPES.run_tests.stage, env),
    runner: new CodeBuildTestRunner(awsClients.codeBuild(), requireEnv(ENV.testRunnerProject, env)),
  };
}

export function awsOpenPrDeps(env: NodeJS.ProcessEnv = process.env): OpenPrDeps {
  const secrets = new SecretsManagerSecrets({ client: awsClients.secretsManager(), githubTokenArn: requireEnv(ENV.githubTokenSecretArn, env) });
  const baseUrl = env[ENV.githubApiUrl] || GITHUB_API_DEFAULT_URL;
  return {
    ...awsPipelineDeps('stage', JOB_TYPES.open_pr.stage, env),
    // A client per job with the (cached) secret value: a rotated token is picked up without a restart.
    host: new GitHubPullRequestHost(async () => new Octokit({ auth: await secrets.githubToken(), baseUrl, log: octokitLog(logger) })),
  };
}

/**
 * A Lambda entry point over a batch handler built on the container's first invocation (not at
 * import, so a missing setting fails the invocation with its name, and tests can import the module).
 */
export function lambdaHandler<C>(build: () => (event: SQSEvent, context: C) => Promise<SQSBatchResponse>): (event: SQSEvent, context: Context & C) => Promise<SQSBatchResponse> {
  let instance: ((event: SQSEvent, context: C) => Promise<SQSBatchResponse>) | undefined;
  return (event, context) => {
    logger.addContext(context);
    return (instance ??= build())(event, context);
  };
}
