/**
 * The one way the Lambda handlers build their dependencies on AWS. This file holds what every
 * function shares: settings read from the environment the stack sets (a missing or malformed one
 * throws ConfigurationError naming it), the SDK clients of the pipeline (created once per
 * container, pointed at AWS_ENDPOINT_URL when set, e.g. LocalStack) and the pipeline's adapters.
 *
 * What one function alone needs lives in its own file (aws-sequencer.ts, aws-command-stage.ts,
 * aws-open-pr.ts, aws-build-events.ts, aws-build-reconciler.ts): esbuild keeps every `require` of an external package (the AWS SDK) that a
 * bundled module imports, used or not, so a client imported here would be loaded by every
 * function at cold start. Nothing function-specific belongs in this file.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Context } from 'aws-lambda';
import { COMMAND_JOB_TYPES } from '../../contract/job-types';
import { ENV, stageDlqUrlEnv } from '../../contract/runtime-env';
import type { BuildCompletionDeps } from '../core/build-completion';
import { ConfigurationError } from '../core/errors';
import { DEFAULT_BACKOFF, type PipelineDeps, type PipelineSettings } from '../core/pipeline';
import type { Consumer } from '../core/ports';
import { DynamoDbLedger } from '../adapters/dynamodb-ledger';
import { EventBridgePublisher } from '../adapters/events';
import { logger, powertoolsJobMetrics } from '../adapters/powertools';
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

function lazy<T>(create: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= create());
}

/** The pipeline's module-scope clients, created on first use and reused by every invocation of the container. */
export const awsClients = {
  sqs: lazy(() => new SQSClient(awsClientConfig())),
  dynamodb: lazy(() => DynamoDBDocumentClient.from(new DynamoDBClient(awsClientConfig()), { marshallOptions: { removeUndefinedValues: true } })),
  eventBridge: lazy(() => new EventBridgeClient(awsClientConfig())),
};

export function ledgerFromEnv(client: DynamoDBDocumentClient = awsClients.dynamodb(), env: NodeJS.ProcessEnv = process.env): DynamoDbLedger {
  return new DynamoDbLedger({ client, tableName: requireEnv(ENV.ledgerTable, env), retentionDays: positiveIntEnv(ENV.ledgerRetentionDays, env) });
}

/**
 * What every consumer shares on AWS: the ledger, its own DLQ, the event bus, metrics, logger,
 * clock and pipeline settings. The worker functions below add their own adapters on top.
 */
export function awsPipelineDeps(consumer: Consumer, env: NodeJS.ProcessEnv = process.env): PipelineDeps {
  return {
    ledger: ledgerFromEnv(awsClients.dynamodb(), env),
    queueOps: new SqsQueueOps({ client: awsClients.sqs(), dlqUrl: requireEnv(ENV.dlqUrl, env) }),
    events: new EventBridgePublisher(awsClients.eventBridge(), requireEnv(ENV.eventBus, env)),
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
    ledger: ledgerFromEnv(awsClients.dynamodb(), env),
    queueOps: new SqsQueueOps({ client: awsClients.sqs() }),
    events: new EventBridgePublisher(awsClients.eventBridge(), requireEnv(ENV.eventBus, env)),
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
