/**
 * The one way workers are built over local parts: the emulators' clients (fauxqs, and dynalite or
 * DynamoDB Local), the loopback git server, the child-process test runner and the local PR store.
 * The local platform (tools/local/platform.ts) runs exactly these; integration tests and benchmarks
 * build their workers here too, overriding only what they control (clock, back-off, lease, a
 * fault-injecting wrapper).
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { GitHostPolicy } from '../../contract/git-remotes';
import {
  BUILD_EVENTS,
  allWorkers,
  commandStageOf,
  type CommandJobType,
  type CustomStagedJobType,
  type StagedJobType,
  type WorkerName,
  type WorkerSettings,
} from '../../contract/job-types';
import { LEDGER_RETENTION_DAYS, VISIBILITY_TIMEOUT_FACTOR, queueTopology } from '../../contract/topology';
import { createBuildEventsHandler, type BuildEventParser, type BuildEventsDeps } from '../core/build-completion';
import type { ReconcilerDeps } from '../core/build-reconciler';
import { applyPatchProcessor } from '../core/jobs/apply-patch';
import { createCommandStageHandler, type CommandStageDeps } from '../core/jobs/command-stage';
import { createOpenPrHandler, type OpenPrDeps } from '../core/jobs/open-pr';
import { DEFAULT_BACKOFF, type BackoffSettings, type PipelineDeps } from '../core/pipeline';
import type {
  BuildFinder,
  Clock,
  EventPublisher,
  JobLogger,
  JobMetrics,
  PullRequestHost,
  TestRunner,
  WorkspaceGit,
} from '../core/ports';
import { createSequencer, type SequencerDeps } from '../core/sequencer';
import { S3DiffReader } from '../adapters/diff-reader';
import { DynamoDbLedger } from '../adapters/dynamodb-ledger';
import { IsomorphicGitWorkspace, type GitAuth } from '../adapters/git';
import { SqsQueueOps } from '../adapters/sqs-queue-ops';
import { randomOwner, systemClock } from '../adapters/system';

/** The emulators' clients and resource names (LocalEmulators of tools/local/emulators.ts satisfies it). */
export interface LocalResources {
  readonly clients: { readonly sqs: SQSClient; readonly dynamodb: DynamoDBDocumentClient; readonly s3: S3Client };
  readonly tableName: string;
  readonly bucketName: string;
  /** Queue URL by the topology's queue name (`agent-jobs`, `run-tests`, ...). */
  readonly queueUrls: Readonly<Record<string, string>>;
  /** DLQ URL by the name of the queue it serves. */
  readonly dlqUrls: Readonly<Record<string, string>>;
}

export type { WorkerName };

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
  const worker = allWorkers().find((w) => w.name === name);
  if (!worker) throw new Error(`no worker ${name} in the catalog`);
  return worker.settings;
}

function required(values: Readonly<Record<string, string>>, key: string): string {
  const value = values[key];
  if (value === undefined) throw new Error(`local resources: no queue ${key}`);
  return value;
}

/** The ledger over the emulators' DynamoDB. */
export function localLedger(resources: Pick<LocalResources, 'clients' | 'tableName'>): DynamoDbLedger {
  return new DynamoDbLedger({
    client: resources.clients.dynamodb,
    tableName: resources.tableName,
    retentionDays: LEDGER_RETENTION_DAYS,
  });
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
  return new IsomorphicGitWorkspace({
    credentials: async () => auth,
    workRoot,
    cacheBytes: LOCAL_REPO_CACHE_BYTES,
    logger,
  });
}

export interface LocalSequencerOptions extends LocalWorkerOptions {
  /** Scratch space for git work. */
  readonly workRoot: string;
  /** @default localGit(workRoot) */
  readonly git?: WorkspaceGit;
  /** @default LOOPBACK_GIT_HOSTS */
  readonly gitHosts?: GitHostPolicy;
}

/** Git servers on loopback, any port: tests' own servers. The platform allows only its own server (host and port). */
export const LOOPBACK_GIT_HOSTS: GitHostPolicy = { hosts: ['127.0.0.1'], localAddresses: true };

/** The local platform's policy: its own git server and nothing else. */
export function ownGitServerPolicy(serverUrl: string): GitHostPolicy {
  return { hosts: [new URL(serverUrl).host], localAddresses: true };
}

export function localSequencerDeps(options: LocalSequencerOptions): SequencerDeps {
  const { resources } = options;
  const git = options.git ?? localGit(options.workRoot, options.logger);
  const stageQueueUrls = Object.fromEntries(
    queueTopology()
      .filter((spec) => spec.role === 'stage')
      .map((spec) => [spec.consumer, required(resources.queueUrls, spec.name)]),
  ) as Record<StagedJobType, string>;
  return {
    ...localPipelineDeps('sequencer', options),
    ordered: {
      apply_patch: applyPatchProcessor({
        diffStore: new S3DiffReader(resources.clients.s3, resources.bucketName),
        git,
      }),
    },
    git,
    stageQueueUrls,
    gitHosts: options.gitHosts ?? LOOPBACK_GIT_HOSTS,
  };
}

/**
 * The local runner's default build timeout, as the CodeBuild project's on AWS
 * (testRunnerTimeoutMinutes' default).
 */
export const LOCAL_BUILD_TIMEOUT_SECONDS = 60 * 60;

export interface LocalCommandStageOptions extends LocalWorkerOptions {
  readonly runner: TestRunner & Partial<BuildFinder>;
  /** @default LOCAL_BUILD_TIMEOUT_SECONDS */
  readonly defaultTimeoutSeconds?: number;
}

export function localCommandStageDeps(type: CommandJobType, options: LocalCommandStageOptions): CommandStageDeps {
  return {
    ...localPipelineDeps(type, options),
    runner: options.runner,
    defaultTimeoutSeconds: options.defaultTimeoutSeconds ?? LOCAL_BUILD_TIMEOUT_SECONDS,
  };
}

export interface LocalOpenPrOptions extends LocalWorkerOptions {
  readonly host: PullRequestHost;
}

export function localOpenPrDeps(options: LocalOpenPrOptions): OpenPrDeps {
  return { ...localPipelineDeps('open_pr', options), host: options.host };
}

/** The DLQ of every command stage's queue, by job type: where the completion path copies failed jobs. */
function stageDlqUrls(resources: LocalResources): Record<string, string> {
  return Object.fromEntries(
    queueTopology()
      .filter((spec) => spec.role === 'stage' && commandStageOf(spec.consumer) !== undefined)
      .map((spec) => [spec.consumer, required(resources.dlqUrls, spec.name)]),
  );
}

/** What the build-completion path needs over the emulators (its own DLQ is the build-events queue's). */
export function localCompletionDeps(options: LocalWorkerOptions): Omit<BuildEventsDeps, 'parse' | 'backoff'> {
  const { ledger, queueOps, events, metrics, logger, clock } = localPipelineDeps('build_events', {
    ...options,
    worker: options.worker ?? BUILD_EVENTS,
  });
  return { ledger, queueOps, events, metrics, logger, clock, stageDlqUrls: stageDlqUrls(options.resources) };
}

export function localBuildEventsDeps(
  options: LocalWorkerOptions & { readonly parse: BuildEventParser; readonly backoff?: BackoffSettings },
): BuildEventsDeps {
  return {
    ...localCompletionDeps(options),
    parse: options.parse,
    ...(options.backoff && { backoff: options.backoff }),
  };
}

/** The local runner reads its own files to answer: it is asked about every RUNNING job at each run. */
export function localReconcilerDeps(
  options: LocalWorkerOptions & { readonly runner: ReconcilerDeps['runner'] },
): ReconcilerDeps {
  return { ...localCompletionDeps(options), runner: options.runner, askBeforeDue: true };
}

/** A worker's batch handler as the local poller invokes it. */
export type WorkerHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

/** The local parts a worker may need beyond the shared options. */
export interface LocalWorkerParts {
  readonly workRoot: string;
  /** The command runner of every command stage. */
  readonly testRunner: TestRunner & Partial<BuildFinder>;
  readonly prHost: PullRequestHost;
  /** @default localGit(workRoot) */
  readonly git?: WorkspaceGit;
  /** Reads the runner's completion events from the build-events queue. */
  readonly parseBuildEvent: BuildEventParser;
  /** @default LOOPBACK_GIT_HOSTS */
  readonly gitHosts?: GitHostPolicy;
}

/**
 * Staged job types with a processor of their own, over local parts. Keyed by every such type, so
 * a new custom stage does not compile until it has a local handler too; command stages need none.
 */
const CUSTOM_STAGES: Record<
  CustomStagedJobType,
  (options: LocalWorkerOptions, parts: LocalWorkerParts) => WorkerHandler
> = {
  open_pr: (options, parts) => createOpenPrHandler(localOpenPrDeps({ ...options, host: parts.prHost })),
};

/** The handler of any worker of the catalog over local parts. */
export function localWorker(name: WorkerName, options: LocalWorkerOptions, parts: LocalWorkerParts): WorkerHandler {
  if (name === 'sequencer')
    return createSequencer(
      localSequencerDeps({ ...options, workRoot: parts.workRoot, git: parts.git, gitHosts: parts.gitHosts }),
    );
  if (name === 'build_events')
    return createBuildEventsHandler(localBuildEventsDeps({ ...options, parse: parts.parseBuildEvent }));
  if (commandStageOf(name))
    return createCommandStageHandler(
      name as CommandJobType,
      localCommandStageDeps(name as CommandJobType, { ...options, runner: parts.testRunner }),
    );
  const custom = CUSTOM_STAGES[name as CustomStagedJobType] as (typeof CUSTOM_STAGES)[CustomStagedJobType] | undefined;
  if (!custom)
    throw new Error(
      `job type ${name} is staged but neither a command stage nor in CUSTOM_STAGES (src/compose/local.ts)`,
    );
  return custom(options, parts);
}
