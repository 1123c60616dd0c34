/**
 * What every Lambda handler shares at cold start: settings read from the environment (a missing or
 * malformed one throws ConfigurationError naming it), module-scope SDK clients (created once per
 * container, pointed at AWS_ENDPOINT_URL when set, e.g. LocalStack), and the Powertools Logger
 * and Metrics singletons.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { JobType, WorkerSettings } from '../../contract/job-types';
import { ENV, METRICS_NAMESPACE } from '../../contract/runtime-env';
import { VISIBILITY_TIMEOUT_FACTOR } from '../../contract/topology';
import { ConfigurationError } from '../core/errors';
import type { Consumer } from '../core/ledger';
import type { BackoffSettings, Clock, JobMetrics, PipelineDeps, PipelineSettings } from '../core/pipeline';
import { DynamoDbLedger } from './dynamodb-ledger';
import { EventBridgePublisher } from './events';
import { SqsQueueOps } from './sqs-queue-ops';

const SERVICE_NAME = 'agent-jobs';

export const logger = new Logger({ serviceName: SERVICE_NAME });
export const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: SERVICE_NAME });

/** Each count is flushed at once (single metric), so concurrent records never share dimensions. */
export function powertoolsJobMetrics(source: Metrics = metrics): JobMetrics {
  return {
    count(metric, jobType?: JobType) {
      const single = source.singleMetric();
      if (jobType) single.addDimension('jobType', jobType);
      single.addMetric(metric, MetricUnit.Count, 1);
    },
  };
}

export const systemClock: Clock = { now: () => Date.now() };
export const randomOwner = (): string => randomUUID();

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

/** Retry back-off of every consumer: 10 s doubling per receive, at most 15 minutes. */
export const DEFAULT_BACKOFF: BackoffSettings = { baseSeconds: 10, capSeconds: 900 };

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
};

export function ledgerFromEnv(client: DynamoDBDocumentClient = awsClients.dynamodb(), env: NodeJS.ProcessEnv = process.env): DynamoDbLedger {
  return new DynamoDbLedger({ client, tableName: requireEnv(ENV.ledgerTable, env), retentionDays: positiveIntEnv(ENV.ledgerRetentionDays, env) });
}

/**
 * What every consumer shares on AWS: the ledger, its own DLQ, the event bus, metrics, logger,
 * clock and pipeline settings, all from the environment the stack sets (a missing variable throws
 * ConfigurationError naming it). Handlers add their own adapters on top.
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
