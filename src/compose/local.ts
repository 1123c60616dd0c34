/**
 * The one way workers are built over local parts: the emulators' clients (fauxqs, dynalite), the
 * loopback git server, the child-process test runner and the local PR store. The local platform
 * (src/local/platform.ts) runs exactly these; integration tests and benchmarks build their workers
 * here too, overriding only what they control (clock, back-off, lease, a fault-injecting wrapper).
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { JOB_TYPES, SEQUENCER, type StagedJobType, type WorkerSettings } from '../../contract/job-types';
import { LEDGER_RETENTION_DAYS, VISIBILITY_TIMEOUT_FACTOR, queueTopology } from '../../contract/topology';
import { applyPatchProcessor } from '../core/jobs/apply-patch';
import { createOpenPrHandler, type OpenPrDeps } from '../core/jobs/open-pr';
import { DEFAULT_WAIT_POLICY, createRunTestsHandler, type RunTestsDeps, type InvocationContext, type WaitPolicy } from '../core/jobs/run-tests';
import { DEFAULT_BACKOFF, type BackoffSettings, type PipelineDeps } from '../core/pipeline';
import type { BuildFinder, Clock, EventPublisher, JobLogger, JobMetrics, PullRequestHost, TestRunner, WorkspaceGit } from '../core/ports';
import { createSequencer, type SequencerDeps } from '../core/sequencer';
import { S3DiffStore } from '../adapters/diff-store';
import { DynamoDbLedger } from '../adapters/dynamodb-ledger';
import { IsomorphicGitWorkspace, type GitAuth } from '../adapters/git';
import { SqsQueueOps } from '../adapters/sqs-queue-ops';
import { randomOwner, systemClock } from '../adapters/system';

/** The emulators' clients and resource names (LocalEmulators of src/local/emulators.ts satisfies it). */
export interface LocalResources {
  readonly clients: { readonly sqs: SQSClient; readonly dynamodb: DynamoDBDocumentClient; readonly s3: S3Client };
  readonly tableName: string;
  readonly bucketName: string;
  /** Queue URL by the topology's queue name (`agent-jobs`, `run-tests`, ...). */
  readonly queueUrls: Readonly<Record<string, string>>;
  /** DLQ URL by the name of the queue it serves. */
  readonly dlqUrls: Readonly<Record<string, string>>;
}

export type WorkerName = 'sequencer' | StagedJobType;

/** What every local worker shares; the defaults are the platform's (as on AWS). */
export interface LocalWorkerOptions {
  readonly resources: LocalResources;
  readonly events: EventPublisher;
  readonly logger: JobLogger;
  /** @default counts logged at debug (CloudWatch metrics have no local counterpart) */
  readonly metrics?: JobMetrics;
  /** @default the system clock */
  readonly clock?: Clock;
  /** @default DEFAULT_BACKOFF */
  readonly backoff?: BackoffSettings;
  /** @default the worker's timeout, as on AWS */
  readonly leaseSeconds?: number;
  /** @default the catalog's settings of the worker */
  readonly worker?: WorkerSettings;
}

function workerSettings(name: WorkerName): WorkerSettings {
  return name === 'sequencer' ? SEQUENCER : JOB_TYPES[name].stage;
}

function required(values: Readonly<Record<string, string>>, key: string): string {
  const value = values[key];
  if (value === undefined) throw new Error(`local resources: no queue ${key}`);
  return value;
}

/** The ledger over the emulators' DynamoDB. */
export function localLedger(resources: Pick<LocalResources, 'clients' | 'tableName'>): DynamoDbLedger {
  return new DynamoDbLedger({ client: resources.clients.dynamodb, tableName: resources.tableName, retentionDays: LEDGER_RETENTION_DAYS });
}

/** The pipeline deps of one worker over the emulators. */
export function localPipelineDeps(name: WorkerName, options: LocalWorkerOptions): PipelineDeps {
  const worker = options.worker ?? workerSettings(name);
  const { resources, logger } = options;
  return {
    ledger: localLedger(resources),
    queueOps: new SqsQueueOps({ client: resources.clients.sqs, dlqUrl: required(resources.dlqUrls, worker.queue) }),
    events: options.events,
    metrics: options.metrics ?? { count: (metric, jobType) => logger.debug('metric', { metric, jobType }) },
    logger,
    clock: options.clock ?? systemClock,
    newOwner: randomOwner,
    settings: {
      consumer: name === 'sequencer' ? 'sequencer' : 'stage',
      leaseSeconds: options.leaseSeconds ?? worker.timeoutSeconds,
      maxReceiveCount: worker.maxReceiveCount,
      visibilitySeconds: worker.timeoutSeconds * VISIBILITY_TIMEOUT_FACTOR,
      backoff: options.backoff ?? DEFAULT_BACKOFF,
    },
  };
}

/** Idle workspace repositories the local platform keeps between jobs (as a warm Lambda does in /tmp). */
export const LOCAL_REPO_CACHE_BYTES = 512 * 2 ** 20;

/** The git adapter over the loopback git server: the platform's own credential (none for a tests' open server). */
export function localGit(workRoot: string, logger?: JobLogger, auth?: GitAuth): IsomorphicGitWorkspace {
  return new IsomorphicGitWorkspace({ credentials: async () => auth, workRoot, cacheBytes: LOCAL_REPO_CACHE_BYTES, logger });
}

export interface LocalSequencerOptions extends LocalWorkerOptions {
  /** Scratch space for git work. */
  readonly workRoot: string;
  /** @default localGit(workRoot) */
  readonly git?: WorkspaceGit;
}

export function localSequencerDeps(options: LocalSequencerOptions): SequencerDeps {
  const { resources } = options;
  const git = options.git ?? localGit(options.workRoot, options.logger);
  const stageQueueUrls = Object.fromEntries(
    queueTopology()
      .filter((spec) => !spec.fifo)
      .map((spec) => [spec.consumer, required(resources.queueUrls, spec.name)]),
  ) as Record<StagedJobType, string>;
  return {
    ...localPipelineDeps('sequencer', options),
    ordered: { apply_patch: applyPatchProcessor({ diffStore: new S3DiffStore(resources.clients.s3, resources.bucketName), git }) },
    git,
    stageQueueUrls,
  };
}

/** Polling a local child process is cheap: a short interval keeps local runs snappy. */
export const LOCAL_WAIT_POLICY: WaitPolicy = { ...DEFAULT_WAIT_POLICY, pollIntervalMs: 500, reserveMs: 2_000 };

export interface LocalRunTestsOptions extends LocalWorkerOptions {
  readonly runner: TestRunner & Partial<BuildFinder>;
  /** @default LOCAL_WAIT_POLICY */
  readonly wait?: WaitPolicy;
  readonly sleep?: (ms: number) => Promise<void>;
}

export function localRunTestsDeps(options: LocalRunTestsOptions): RunTestsDeps {
  return { ...localPipelineDeps('run_tests', options), runner: options.runner, wait: options.wait ?? LOCAL_WAIT_POLICY, ...(options.sleep && { sleep: options.sleep }) };
}

export interface LocalOpenPrOptions extends LocalWorkerOptions {
  readonly host: PullRequestHost;
}

export function localOpenPrDeps(options: LocalOpenPrOptions): OpenPrDeps {
  return { ...localPipelineDeps('open_pr', options), host: options.host };
}

/** A worker's batch handler as the local poller invokes it (the Lambda context's remaining time included). */
export type WorkerHandler = (event: SQSEvent, context: InvocationContext) => Promise<SQSBatchResponse>;

/** The local parts a worker may need beyond the shared options. */
export interface LocalWorkerParts {
  readonly workRoot: string;
  readonly testRunner: TestRunner & Partial<BuildFinder>;
  readonly prHost: PullRequestHost;
  /** @default localGit(workRoot) */
  readonly git?: WorkspaceGit;
}

/**
 * The handler of every worker of the catalog over local parts. Keyed by every worker, so a new
 * staged job type does not compile until it has a local handler too.
 */
export const LOCAL_WORKERS: Record<WorkerName, (options: LocalWorkerOptions, parts: LocalWorkerParts) => WorkerHandler> = {
  sequencer: (options, parts) => createSequencer(localSequencerDeps({ ...options, workRoot: parts.workRoot, git: parts.git })),
  run_tests: (options, parts) => createRunTestsHandler(localRunTestsDeps({ ...options, runner: parts.testRunner })),
  open_pr: (options, parts) => createOpenPrHandler(localOpenPrDeps({ ...options, host: parts.prHost })),
};
