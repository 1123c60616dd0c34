/**
 * The one way the Lambda handlers build their dependencies on AWS. This file holds what every
 * function shares: settings read from the environment the stack sets (a missing or malformed one
 * throws ConfigurationError naming it), the SDK clients of the pipeline (created once per
 * container, pointed at AWS_ENDPOINT_URL when set, e.g. LocalStack) and the pipeline's adapters.
 *
 * What one function alone needs lives in its own file (aws-sequencer.ts, aws-command-stage.ts,
 * aws-open-pr.ts, aws-build-events.ts, aws-build-reconciler.ts); what two share is here (the
 * CodeBuild runner) or in aws-secrets.ts (Secrets Manager, which the sequencer's git engine, a
 * separate file of its bundle, takes without this file), and esbuild leaves it out of a bundle
 * that never calls it (test/infra/bundling.test.ts checks which SDK packages each bundle can require).
 *
 * No SDK package is imported for its values, here or in a file a handler imports: loading an SDK
 * client package costs tens of milliseconds each (the first one well over a hundred: the shared
 * core), most of what a cold start spent before the first event. Each is required by the adapter
 * that uses it, and each adapter is made when one of its methods is first called (onFirstUse in
 * first-use.ts), so
 * a client an invocation never calls is never loaded: S3 only for a claim-checked diff, SQS only
 * to forward, back off or move a job to a DLQ. `require()`, not `import()`: esbuild's CommonJS
 * bundle keeps such a call where it is, and ts-jest serves it as it serves any module.
 */
import type { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Context } from 'aws-lambda';
import { COMMAND_JOB_TYPES } from '../../contract/job-types';
import { ENV, GITHUB_API_DEFAULT_URL, stageDlqUrlEnv } from '../../contract/runtime-env';
import type { BuildCheckout } from '../adapters/build-checkout';
import type { BuildCompletionDeps } from '../core/build-completion';
import { ConfigurationError } from '../core/errors';
import { DEFAULT_BACKOFF, type PipelineDeps, type PipelineSettings } from '../core/pipeline';
import type { BuildFinder, BuildStopper, Consumer, EventPublisher, Ledger, QueueOps, TestRunner } from '../core/ports';
import { logger, powertoolsJobMetrics } from '../adapters/powertools';
import { randomOwner, systemClock } from '../adapters/system';
import { lazy, onFirstUse } from './first-use';

export function requireEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') throw new ConfigurationError(`environment variable ${name} is not set`);
  return value;
}

/** GitHub's REST API the functions call: the setting, else github.com's. */
export function githubApiUrlEnv(env: NodeJS.ProcessEnv = process.env): string {
  return env[ENV.githubApiUrl] || GITHUB_API_DEFAULT_URL;
}

export function positiveIntEnv(name: string, env: NodeJS.ProcessEnv = process.env): number {
  const raw = requireEnv(name, env);
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0)
    throw new ConfigurationError(`environment variable ${name} must be a positive integer, got "${raw}"`);
  return value;
}

/**
 * The pipeline settings of a worker, from the environment the stack sets for it: the values as
 * deployed, with the environment's overrides applied (never the catalog's compiled defaults, or a
 * longer timeout would heartbeat a message to a visibility shorter than the function runs).
 */
export function pipelineSettingsFromEnv(consumer: Consumer, env: NodeJS.ProcessEnv = process.env): PipelineSettings {
  return {
    consumer,
    leaseSeconds: positiveIntEnv(ENV.leaseSeconds, env),
    maxReceiveCount: positiveIntEnv(ENV.maxReceiveCount, env),
    visibilitySeconds: positiveIntEnv(ENV.visibilityTimeoutSeconds, env),
    backoff: DEFAULT_BACKOFF,
  };
}

/** SDK settings shared by every client: AWS_ENDPOINT_URL (LocalStack) when set, the SDK default chain otherwise. */
export function awsClientConfig(env: NodeJS.ProcessEnv = process.env): { endpoint?: string } {
  const endpoint = env['AWS_ENDPOINT_URL'];
  return endpoint ? { endpoint } : {};
}

// Each loads its package at the call (see the header); esbuild drops a loader no function calls.
const loadDynamoDb = (): typeof import('@aws-sdk/client-dynamodb') => require('@aws-sdk/client-dynamodb');
const loadDocumentClient = (): typeof import('@aws-sdk/lib-dynamodb') => require('@aws-sdk/lib-dynamodb');
const loadSqs = (): typeof import('@aws-sdk/client-sqs') => require('@aws-sdk/client-sqs');
const loadEventBridge = (): typeof import('@aws-sdk/client-eventbridge') => require('@aws-sdk/client-eventbridge');
const loadLedger = (): typeof import('../adapters/dynamodb-ledger') => require('../adapters/dynamodb-ledger');
const loadQueueOps = (): typeof import('../adapters/sqs-queue-ops') => require('../adapters/sqs-queue-ops');
const loadEvents = (): typeof import('../adapters/events') => require('../adapters/events');
const loadCodeBuild = (): typeof import('@aws-sdk/client-codebuild') => require('@aws-sdk/client-codebuild');
const loadTestRunner = (): typeof import('../adapters/codebuild-test-runner') =>
  require('../adapters/codebuild-test-runner');

/** The pipeline's module-scope clients, created on first use and reused by every invocation of the container. */
export const awsClients = {
  sqs: lazy((): SQSClient => new (loadSqs().SQSClient)(awsClientConfig())),
  dynamodb: lazy((): DynamoDBDocumentClient =>
    loadDocumentClient().DynamoDBDocumentClient.from(new (loadDynamoDb().DynamoDBClient)(awsClientConfig()), {
      marshallOptions: { removeUndefinedValues: true },
    }),
  ),
  eventBridge: lazy((): EventBridgeClient => new (loadEventBridge().EventBridgeClient)(awsClientConfig())),
};

export function ledgerFromEnv(
  client: () => DynamoDBDocumentClient = awsClients.dynamodb,
  env: NodeJS.ProcessEnv = process.env,
): Ledger {
  const tableName = requireEnv(ENV.ledgerTable, env);
  const retentionDays = positiveIntEnv(ENV.ledgerRetentionDays, env);
  return onFirstUse(() => new (loadLedger().DynamoDbLedger)({ client: client(), tableName, retentionDays }));
}

/** The SQS operations of a consumer (`dlqUrl`: its own DLQ, where a permanent failure goes). */
export function sqsQueueOps(options: { dlqUrl?: string } = {}): QueueOps {
  return onFirstUse(() => new (loadQueueOps().SqsQueueOps)({ client: awsClients.sqs(), ...options }));
}

export function eventBridgePublisher(env: NodeJS.ProcessEnv = process.env): EventPublisher {
  const busName = requireEnv(ENV.eventBus, env);
  return onFirstUse(() => new (loadEvents().EventBridgePublisher)(awsClients.eventBridge(), busName));
}

/**
 * The CodeBuild runner of the command stages (with their builds' checkout credential) and the
 * build reconciler (TEST_RUNNER_PROJECT_NAME).
 */
export function codeBuildTestRunner(
  env: NodeJS.ProcessEnv = process.env,
  checkout?: BuildCheckout,
): TestRunner & BuildFinder & BuildStopper {
  const project = requireEnv(ENV.testRunnerProject, env);
  return onFirstUse(
    () =>
      new (loadTestRunner().CodeBuildTestRunner)(
        new (loadCodeBuild().CodeBuildClient)(awsClientConfig(env)),
        project,
        checkout,
      ),
  );
}

/**
 * What every consumer shares on AWS: the ledger, its own DLQ, the event bus, metrics, logger,
 * clock and pipeline settings. The worker functions below add their own adapters on top.
 */
export function awsPipelineDeps(consumer: Consumer, env: NodeJS.ProcessEnv = process.env): PipelineDeps {
  return {
    ledger: ledgerFromEnv(awsClients.dynamodb, env),
    queueOps: sqsQueueOps({ dlqUrl: requireEnv(ENV.dlqUrl, env) }),
    events: eventBridgePublisher(env),
    metrics: powertoolsJobMetrics(),
    logger,
    clock: systemClock,
    newOwner: randomOwner,
    settings: pipelineSettingsFromEnv(consumer, env),
  };
}

/**
 * What the build-completion path needs on AWS (the build-events and build-reconciler functions):
 * the ledger, the bus and every command stage's DLQ, where a failed job's message copy goes.
 */
export function awsCompletionDeps(env: NodeJS.ProcessEnv = process.env): BuildCompletionDeps {
  return {
    ledger: ledgerFromEnv(awsClients.dynamodb, env),
    queueOps: sqsQueueOps(),
    events: eventBridgePublisher(env),
    metrics: powertoolsJobMetrics(),
    logger,
    clock: systemClock,
    stageDlqUrls: Object.fromEntries(COMMAND_JOB_TYPES.map((type) => [type, requireEnv(stageDlqUrlEnv(type), env)])),
  };
}

/**
 * A Lambda entry point over a handler built on the container's first invocation (not at import, so
 * a missing setting fails the invocation with its name, and tests can import the module).
 */
export function lambdaHandler<E, R>(build: () => (event: E) => Promise<R>): (event: E, context: Context) => Promise<R> {
  let instance: ((event: E) => Promise<R>) | undefined;
  return (event, context) => {
    logger.addContext(context);
    return (instance ??= build())(event);
  };
}
