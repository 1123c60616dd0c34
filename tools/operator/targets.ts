/**
 * Where the CLI sends its calls: the local platform (described by `<stateDir>/platform.json`,
 * written by the platform when it is ready) or a deployed stack (described by its CloudFormation
 * outputs). Both resolve to one Target, so every command talks to either the same way.
 */
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { CloudFormationClient, Output } from '@aws-sdk/client-cloudformation';
import type { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';
import type { CodeBuildClient } from '@aws-sdk/client-codebuild';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import * as z from 'zod/mini';
import {
  BUILD_RECONCILER_LOG_GROUP_OUTPUT,
  STACK_OUTPUTS,
  dlqUrlOutputKey,
  logGroupOutputKey,
  queueUrlOutputKey,
} from '../../contract/stack-outputs';
import { JOB_TYPE_NAMES } from '../../contract/job-types';
import { platformQueues, queueName, queueTopology } from '../../contract/topology';
import { isProcessAlive } from '../../src/adapters/system';
import { PLATFORM_FILE } from '../local/state-dir';
import { TargetError } from './errors';

export interface QueueEndpoint {
  /** Base name from the topology: `agent-jobs`, `run-tests`, ... */
  readonly name: string;
  readonly url: string;
  readonly dlqUrl: string;
  readonly fifo: boolean;
  /** `sequencer` or the staged job type the queue feeds. */
  readonly consumer: string;
}

export interface Target {
  readonly kind: 'local' | 'stack';
  /** The CloudFormation stack, on AWS. */
  readonly stackName?: string;
  /** For messages: `local platform (/path/.agent-jobs)` or `stack dev (eu-west-1)`. */
  readonly label: string;
  readonly region: string;
  /** Local emulator endpoints; absent on AWS (the SDK's defaults, or AWS_ENDPOINT_URL, apply). */
  readonly endpoints: { readonly sqs?: string; readonly dynamodb?: string; readonly s3?: string };
  /** The FIFO jobs queue first, then the stage queues, in topology order. */
  readonly queues: readonly QueueEndpoint[];
  /**
   * The build-events queue and its DLQ (failed EventBridge deliveries of build events, and events
   * its consumer could not read); absent when the catalog has no command stage. It carries no job.
   */
  readonly buildEvents?: QueueEndpoint;
  readonly tableName: string;
  readonly diffBucket?: string;
  /**
   * On AWS: the log group of each function, by worker name (`sequencer`, `run_tests`, ...,
   * `build_reconciler`); a stack deployed before these outputs existed has none.
   */
  readonly logGroups?: Readonly<Record<string, string>>;
  /**
   * Job types of this catalog the target was made without (a local platform started before their
   * declaration): sending one is refused (requireServed), everything else works. Absent when it
   * serves them all.
   */
  readonly unserved?: { readonly jobTypes: readonly string[]; readonly remedy: string };
  /** Only on the local platform. */
  readonly local?: {
    readonly stateDir: string;
    readonly gitUrl: string;
    readonly eventsFile: string;
    /** How the platform isolates test commands, as it said at start; absent from an older platform's file. */
    readonly testIsolation?: TestIsolation;
  };
}

/** Credentials the local emulators accept; never used against AWS. */
const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

export interface ResolveOptions {
  /** Stack name; when absent the local platform is used. */
  readonly stack?: string;
  readonly region?: string;
  readonly stateDir: string;
  /** Injected for tests; created from the region otherwise. */
  readonly cloudFormation?: Pick<CloudFormationClient, 'send'>;
}

export async function resolveTarget(options: ResolveOptions): Promise<Target> {
  if (options.stack === undefined) return readLocalPlatform(options.stateDir);
  const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
  if (!region) throw new TargetError(`no region for stack ${options.stack}: pass --region or set AWS_REGION`);
  const { CloudFormationClient, DescribeStacksCommand } = loadCloudFormation();
  const cloudFormation = options.cloudFormation ?? new CloudFormationClient({ region });
  const response = await cloudFormation
    .send(new DescribeStacksCommand({ StackName: options.stack }))
    .catch((error: unknown) => {
      throw new TargetError(`cannot describe stack ${options.stack} in ${region}: ${(error as Error).message}`, {
        cause: error,
      });
    });
  const stack = response.Stacks?.[0];
  if (!stack) throw new TargetError(`stack ${options.stack} not found in ${region}`);
  return targetFromStackOutputs(options.stack, region, stack.Outputs ?? []);
}

/** Queue keys derive from the topology, so a new job type's queue is found without a CLI change. */
export function targetFromStackOutputs(stackName: string, region: string, outputs: readonly Output[]): Target {
  const byKey = new Map(
    outputs.flatMap((o) => (o.OutputKey && o.OutputValue ? [[o.OutputKey, o.OutputValue] as const] : [])),
  );
  const missing: string[] = [];
  const need = (key: string): string => {
    const value = byKey.get(key);
    if (value === undefined) missing.push(key);
    return value ?? '';
  };
  const queues = queueTopology().map((q) => ({
    name: q.name,
    url: need(queueUrlOutputKey(q.name)),
    dlqUrl: need(dlqUrlOutputKey(q.name)),
    fifo: q.fifo,
    consumer: q.consumer,
  }));
  const buildEvents = buildEventsEndpoint(
    (name) => byKey.get(queueUrlOutputKey(name)),
    (name) => byKey.get(dlqUrlOutputKey(name)),
  );
  const tableName = need(STACK_OUTPUTS.ledgerTableName);
  const logGroups = Object.fromEntries(
    [
      ...queues.map((q) => [q.consumer, logGroupOutputKey(q.consumer)] as const),
      ['build_reconciler', BUILD_RECONCILER_LOG_GROUP_OUTPUT] as const,
    ].flatMap(([worker, key]) => {
      const name = byKey.get(key);
      return name === undefined ? [] : [[worker, name]];
    }),
  );
  if (missing.length > 0)
    throw new TargetError(`stack ${stackName} lacks the outputs ${missing.join(', ')} (is it an agent-jobs stack?)`);
  return {
    kind: 'stack',
    stackName,
    label: `stack ${stackName} (${region})`,
    region,
    endpoints: {},
    queues,
    ...(buildEvents && { buildEvents }),
    tableName,
    diffBucket: byKey.get(STACK_OUTPUTS.diffBucketName),
    logGroups,
  };
}

/** The build-events queue's endpoint, when the catalog has one and its URLs are known. */
function buildEventsEndpoint(
  url: (name: string) => string | undefined,
  dlqUrl: (name: string) => string | undefined,
): QueueEndpoint | undefined {
  const spec = platformQueues().find((q) => q.role === 'buildEvents');
  if (spec === undefined) return undefined;
  const [queue, dlq] = [url(spec.name), dlqUrl(spec.name)];
  return queue && dlq
    ? { name: spec.name, url: queue, dlqUrl: dlq, fifo: spec.fifo, consumer: spec.consumer }
    : undefined;
}

/** `platform.json`'s testIsolation (IsolationReport in tools/local/confinement.ts): what the doctor shows. */
export interface TestIsolation {
  readonly summary: string;
  readonly stops: readonly string[];
  readonly doesNotStop: readonly string[];
  readonly degraded?: string | undefined;
}
const testIsolationSchema = z.object({
  summary: z.string(),
  stops: z.array(z.string()),
  doesNotStop: z.array(z.string()),
  degraded: z.optional(z.string()),
});

/** The part of the local platform's `platform.json` (PlatformInfo in tools/local/platform.ts) the CLI reads. */
const platformFileSchema = z.object({
  pid: z.int(),
  region: z.string(),
  endpoints: z.object({ sqs: z.string(), dynamodb: z.string(), s3: z.string() }),
  queueUrls: z.record(z.string(), z.string()),
  dlqUrls: z.record(z.string(), z.string()),
  tableName: z.string(),
  bucketName: z.string(),
  gitUrl: z.string(),
  eventLog: z.string(),
  testIsolation: z.optional(testIsolationSchema),
  /** The job types it serves; absent from an older platform's file (then its queues tell). */
  jobTypes: z.optional(z.array(z.string())),
  /** Where its ledger lives; absent from an older platform's file, which is then taken as in memory (the advice that loses nothing). */
  ledger: z.optional(z.enum(['disk', 'memory'])),
});

/** Reads the file the local platform writes when it is ready (and removes when it stops). */
export async function readLocalPlatform(stateDir: string): Promise<Target> {
  const file = path.join(stateDir, PLATFORM_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new TargetError(`cannot read ${file}: ${(error as Error).message}`, { cause: error });
    throw new TargetError(
      `no local platform at ${stateDir} (${file} not found): start it with "agent-jobs local up", or pass --stack`,
    );
  }
  const parsed = platformFileSchema.safeParse(parseJsonOrUndefined(text));
  if (!parsed.success) throw new TargetError(`${file} is not a platform description: ${z.prettifyError(parsed.error)}`);
  if (!isProcessAlive(parsed.data.pid))
    throw new TargetError(
      `the local platform at ${stateDir} is not running (pid ${parsed.data.pid} is gone): start it with "agent-jobs local up"`,
    );
  return targetFromPlatformFile(stateDir, parsed.data);
}

function parseJsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined; // reported by the schema check with the file's name
  }
}

/**
 * How to make a running local platform serve the catalog as it is now (README: Customize). A
 * platform whose ledger is in memory loses it on any restart: the advice says so, not that it keeps it.
 */
function localRestartRemedy(ledger: 'disk' | 'memory' | undefined): string {
  if (ledger === 'disk')
    return 'restart it to serve it (Ctrl-C, then "npm start -- --persist", which keeps its ledger and DLQ messages)';
  return (
    'restart it to serve it (Ctrl-C, then "npm start"); its ledger is in memory: a restart loses every job and DLQ message it holds ' +
    '(agent-jobs unfinished and dlq list show them first), and "npm start -- --persist" keeps them across later restarts'
  );
}

/**
 * The platform's queues as this catalog names them. A stage queue the platform lacks is a job type
 * declared after it started (decisions §32): the target serves every other; any other queue
 * missing means the file is not this platform's.
 */
function targetFromPlatformFile(stateDir: string, file: z.infer<typeof platformFileSchema>): Target {
  const queues: QueueEndpoint[] = [];
  const lacking: string[] = [];
  for (const q of queueTopology()) {
    const url = file.queueUrls[q.name];
    const dlqUrl = file.dlqUrls[q.name];
    if (url && dlqUrl) queues.push({ name: q.name, url, dlqUrl, fifo: q.fifo, consumer: q.consumer });
    else if (q.role === 'stage') lacking.push(q.consumer);
    else throw new TargetError(`${path.join(stateDir, PLATFORM_FILE)} lacks the queue ${q.name}`);
  }
  const buildEvents = buildEventsEndpoint(
    (name) => file.queueUrls[name],
    (name) => file.dlqUrls[name],
  );
  const served = file.jobTypes;
  const unserved = served === undefined ? lacking : JOB_TYPE_NAMES.filter((type) => !served.includes(type));
  return {
    kind: 'local',
    label: `local platform (${stateDir})`,
    ...(unserved.length > 0 && { unserved: { jobTypes: unserved, remedy: localRestartRemedy(file.ledger) } }),
    region: file.region,
    endpoints: file.endpoints,
    queues,
    ...(buildEvents && { buildEvents }),
    tableName: file.tableName,
    diffBucket: file.bucketName,
    local: {
      stateDir,
      gitUrl: file.gitUrl,
      eventsFile: file.eventLog,
      ...(file.testIsolation && { testIsolation: file.testIsolation }),
    },
  };
}

/** Refuses (TargetError: unavailable) a job type the target was made without, naming the way to serve it. */
export function requireServed(target: Target, jobType: string): void {
  if (target.unserved?.jobTypes.includes(jobType) !== true) return;
  throw new TargetError(
    `the ${target.label} was started before job type ${jobType} was declared: ${target.unserved.remedy}`,
  );
}

/** requireServed for the job type whose queue `name` is (`check-format`, or with `.fifo`); a name of no job type passes. */
export function requireServedQueue(target: Target, name: string): void {
  const type = queueTopology().find((q) => q.name === name || queueName(q.name, q.fifo) === name)?.consumer;
  if (type !== undefined) requireServed(target, type);
}

/** The FIFO queue every job is sent to. */
export function jobsQueue(target: Target): QueueEndpoint {
  const queue = target.queues.find((q) => q.fifo);
  if (!queue) throw new TargetError(`${target.label} has no FIFO jobs queue`);
  return queue;
}

export interface TargetClients {
  readonly sqs: SQSClient;
  readonly dynamodb: DynamoDBDocumentClient;
  readonly s3: S3Client;
  /** A stack's builds and their logs (following a run's output). */
  readonly codeBuild: CodeBuildClient;
  readonly logs: CloudWatchLogsClient;
  destroy(): void;
}

/*
 * The SDK packages load when a client is first used, not when the CLI starts: each costs tens of
 * milliseconds to load, and most commands use one of them (`status` only DynamoDB). require(), not
 * import(): the bin's CommonJS code (tsx, or the bundle in bin/agent-jobs.js) does not serve import().
 */
const loadCloudFormation = (): typeof import('@aws-sdk/client-cloudformation') =>
  require('@aws-sdk/client-cloudformation');
const loadDynamoDb = (): typeof import('@aws-sdk/client-dynamodb') => require('@aws-sdk/client-dynamodb');
const loadDocumentClient = (): typeof import('@aws-sdk/lib-dynamodb') => require('@aws-sdk/lib-dynamodb');
const loadS3 = (): typeof import('@aws-sdk/client-s3') => require('@aws-sdk/client-s3');
const loadSqs = (): typeof import('@aws-sdk/client-sqs') => require('@aws-sdk/client-sqs');
const loadCodeBuild = (): typeof import('@aws-sdk/client-codebuild') => require('@aws-sdk/client-codebuild');
const loadLogs = (): typeof import('@aws-sdk/client-cloudwatch-logs') => require('@aws-sdk/client-cloudwatch-logs');

/**
 * SDK clients for a target: explicit endpoints and dummy credentials locally, the default chain on
 * AWS. Each client is made on first use.
 */
export function createClients(target: Target): TargetClients {
  const local = target.kind === 'local' ? { credentials: LOCAL_CREDENTIALS } : {};
  let sqs: SQSClient | undefined;
  let raw: DynamoDBClient | undefined;
  let dynamodb: DynamoDBDocumentClient | undefined;
  let s3: S3Client | undefined;
  let codeBuild: CodeBuildClient | undefined;
  let logs: CloudWatchLogsClient | undefined;
  return {
    get sqs() {
      // Never the queue URL's host in place of the endpoint (the SDK's default when the two differ):
      // behind AWS_ENDPOINT_URL (LocalStack, a test), the stack's queue URLs still name AWS's host.
      return (sqs ??= new (loadSqs().SQSClient)({
        region: target.region,
        endpoint: target.endpoints.sqs,
        useQueueUrlAsEndpoint: false,
        ...local,
      }));
    },
    get dynamodb() {
      raw ??= new (loadDynamoDb().DynamoDBClient)({
        region: target.region,
        endpoint: target.endpoints.dynamodb,
        ...local,
      });
      return (dynamodb ??= loadDocumentClient().DynamoDBDocumentClient.from(raw, {
        marshallOptions: { removeUndefinedValues: true },
      }));
    },
    get s3() {
      return (s3 ??= new (loadS3().S3Client)({
        region: target.region,
        endpoint: target.endpoints.s3,
        forcePathStyle: target.kind === 'local',
        ...local,
      }));
    },
    get codeBuild() {
      return (codeBuild ??= new (loadCodeBuild().CodeBuildClient)({ region: target.region, ...local }));
    },
    get logs() {
      return (logs ??= new (loadLogs().CloudWatchLogsClient)({ region: target.region, ...local }));
    },
    destroy: () => {
      for (const client of [sqs, raw, s3, codeBuild, logs]) client?.destroy();
    },
  };
}
