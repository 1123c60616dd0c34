/**
 * The local platform (`npm start`): in one process, on 127.0.0.1 only, the emulators (fauxqs for
 * SQS + S3, dynalite for the ledger, or AWS's DynamoDB Local in a Java process of its own: see
 * emulators.ts), the loopback git server, the JSON-lines event log and one poller per queue of the
 * topology that feeds the same handler code as on AWS, wired to local adapters.
 * `<stateDir>/platform.json` tells the CLI where everything is while it runs.
 *
 * State: the ledger (when persisting), the git repositories, test runs, pull requests and what
 * waits on a DLQ (dlq-copies.ts) survive a restart; other queued messages do not, because fauxqs
 * keeps queues in memory only. The ports survive
 * too (stable-ports.ts), so repository and queue URLs stay the same. One platform runs per state
 * directory, locked before anything is deleted or started (state-lock.ts); a persisted ledger is
 * checked against what the directory recorded before anything runs on it (persisted-ledger.ts).
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { readFile, rm } from 'node:fs/promises';
import * as path from 'node:path';
import type { Writable } from 'node:stream';
import { GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { Logger } from '@aws-lambda-powertools/logger';
import { JOB_TYPE_NAMES, type WorkerSettings } from '../../contract/job-types';
import { platformQueues, type QueueSpec } from '../../contract/topology';
import { JsonlEventLog } from '../../src/adapters/events';
import { resolveBranchHead } from '../../src/adapters/git';
import {
  localGit,
  localLedger,
  localReconcilerDeps,
  localWorker,
  ownGitServerPolicy,
  type LocalWorkerParts,
} from '../../src/compose/local';
import { reconcileBuilds, type ReconcilerDeps } from '../../src/core/build-reconciler';
import { errorMessage } from '../../src/core/errors';
import { DEFAULT_BACKOFF, type BackoffSettings } from '../../src/core/pipeline';
import {
  dynamoDbEmulatorOf,
  LOCAL_REGION,
  startEmulators,
  type EmulatorEndpoints,
  type LocalEmulators,
} from './emulators';
import { StreamLogger } from './file-logger';
import { PlatformGitAccess } from './git-access';
import { startGitServer, type GitServer } from './git-server';
import { startLiveView, type LiveView } from './live-view';
import { pollingOrder, startQueuePoller, type QueuePoller } from './poller';
import { LocalPullRequestStore } from './pr-store';
import { isProcessAlive } from '../../src/adapters/system';
import { announceMissedOutcomes } from './missed-outcomes';
import { DlqCopyStore, restoreDlqCopies, saveDlqSends, type RestoredDlqs } from './dlq-copies';
import { releaseOrphanedLeases } from './orphaned-leases';
import { choosePorts, explainBindFailure, portOf, readRecordedPorts, recordPorts } from './stable-ports';
import { prepareLedger } from './persisted-ledger';
import { DEFAULT_STATE_DIR, PLATFORM_FILE, PLATFORM_LOG_FILE, REPOSITORIES_DIR, TEST_RUNS_DIR } from './state-dir';
import { describeIsolation, logIsolation, type IsolationReport } from './confinement';
import { lockStateDir, type StateLock } from './state-lock';
import { LocalTestRunner, localRunEventBody, parseLocalRunEvent, type ReadAccess } from './test-runner';
import { writeFileAtomic } from './write-atomic';

export type PlatformLogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

export interface PlatformOptions {
  /** @default DEFAULT_STATE_DIR */
  readonly stateDir?: string;
  /** 0 or absent: the port of the last start from this state directory, else a free port. */
  readonly ports?: { readonly sqs?: number; readonly dynamodb?: number; readonly git?: number };
  /** Empties the state directory before starting (once it holds the directory's lock). @default false */
  readonly reset?: boolean;
  /** Keeps the ledger on disk under the state directory. @default true */
  readonly persist?: boolean;
  /** Replaces the persisted ledger by the export of its last clean stop (persisted-ledger.ts). @default false */
  readonly restoreLedger?: boolean;
  /**
   * Builds the local test runner runs at once; a start beyond waits, as CodeBuild's concurrent-build
   * quota makes a job wait on AWS. @default no limit
   */
  readonly buildQuota?: number;
  /** Level of the handler logs in `<stateDir>/platform.log`. @default 'INFO' */
  readonly logLevel?: PlatformLogLevel;
  /** Where the ready line and the live view go; null for none (tests). @default process.stdout */
  readonly output?: Writable | null;
  /** Retry back-off of every worker. @default DEFAULT_BACKOFF (as on AWS) */
  readonly backoff?: BackoffSettings;
  /** Worker settings other than the catalog's, by worker name (as config/<env>.json overrides them on AWS). */
  readonly workers?: Partial<Record<string, WorkerSettings>>;
  /** Wraps the parts the workers use (the git remote, test runner, PR host), e.g. to inject faults at a port. */
  readonly decorateParts?: (parts: LocalWorkerParts) => LocalWorkerParts;
  /** How often the build reconciler runs. @default LOCAL_RECONCILE_INTERVAL_MS */
  readonly reconcileIntervalMs?: number;
  /** More lines of the ready message, after the endpoints (the console's URL, from `local up`). */
  readonly readyNotes?: readonly string[];
}

/** The local build reconciler's interval (a schedule on AWS): cheap locally, so more often. */
export const LOCAL_RECONCILE_INTERVAL_MS = 30_000;

/** What `<stateDir>/platform.json` holds: everything a client needs to reach the running platform. */
export interface PlatformInfo {
  readonly pid: number;
  readonly startedAt: string;
  readonly stateDir: string;
  readonly region: string;
  readonly endpoints: EmulatorEndpoints;
  /** By QueueSpec.name, e.g. `agent-jobs` (the FIFO ingress), `run-tests`, `open-pr`. */
  readonly queueUrls: Readonly<Record<string, string>>;
  /** By the QueueSpec.name of the queue each DLQ serves. */
  readonly dlqUrls: Readonly<Record<string, string>>;
  readonly tableName: string;
  readonly bucketName: string;
  /** Base URL of the git server; repositories are `<gitUrl>/<name>.git`. */
  readonly gitUrl: string;
  readonly eventLog: string;
  readonly logFile: string;
  /** How test commands are isolated here, and what that stops (`agent-jobs doctor` shows it). */
  readonly testIsolation: IsolationReport;
  /** The job types of the catalog it started with: a CLI of a later catalog refuses the others (tools/operator/targets.ts). */
  readonly jobTypes: readonly string[];
  /** Where its ledger lives (`--persist`: on disk): whether a restart keeps it. */
  readonly ledger: 'disk' | 'memory';
}

export interface LocalPlatform {
  readonly info: PlatformInfo;
  readonly emulators: LocalEmulators;
  readonly git: GitServer;
  readonly events: JsonlEventLog;
  /** Jobs the previous run left without an outcome (their messages died with it): to be re-sent. */
  readonly unfinishedAtStart: number;
  /** Stops pollers (in-flight batches finish), servers and files; safe to call twice. */
  stop(): Promise<void>;
}

export { InvalidPortsFileError, PortInUseError } from './stable-ports';
export { PlatformAlreadyRunningError, StateDirUnusableError } from './state-lock';
export { LedgerStateError } from './persisted-ledger';

/** Paths inside the state directory. */
function statePaths(stateDir: string) {
  return {
    info: path.join(stateDir, PLATFORM_FILE),
    repos: path.join(stateDir, REPOSITORIES_DIR),
    events: path.join(stateDir, 'events.jsonl'),
    log: path.join(stateDir, PLATFORM_LOG_FILE),
    work: path.join(stateDir, 'work'),
    testRuns: path.join(stateDir, TEST_RUNS_DIR),
  };
}

/** The running platform's description, or undefined when none is running from this state directory. */
export async function readPlatformInfo(stateDir: string = DEFAULT_STATE_DIR): Promise<PlatformInfo | undefined> {
  let info: PlatformInfo;
  try {
    info = JSON.parse(await readFile(statePaths(stateDir).info, 'utf8')) as PlatformInfo;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  // A file left by a killed platform names a dead process.
  return isProcessAlive(info.pid) ? info : undefined;
}

export async function startPlatform(options: PlatformOptions = {}): Promise<LocalPlatform> {
  const stateDir = path.resolve(options.stateDir ?? DEFAULT_STATE_DIR);
  const paths = statePaths(stateDir);
  // Before anything is deleted or started, and held until the last part has stopped (state-lock.ts).
  const lock = await lockStateDir(stateDir);
  const stack = new ShutdownStack();
  stack.push(() => lock.release());
  try {
    if (options.reset) await lock.reset();
    return await startLocked(options, stateDir, paths, lock, stack);
  } catch (error) {
    await stack.unwind();
    throw error;
  }
}

async function startLocked(
  options: PlatformOptions,
  stateDir: string,
  paths: ReturnType<typeof statePaths>,
  lock: StateLock,
  stack: ShutdownStack,
): Promise<LocalPlatform> {
  const logStream = await openLog(paths.log);
  const logger = new StreamLogger(logStream, { serviceName: 'agent-jobs-local', logLevel: options.logLevel ?? 'INFO' });
  stack.push(() => closeStream(logStream));
  const recorded = await readRecordedPorts(stateDir);
  const ports = choosePorts(options.ports ?? {}, recorded);
  const dynamoDb = dynamoDbEmulatorOf();
  const persisted =
    options.persist === false
      ? undefined
      : await prepareLedger({ stateDir, restore: options.restoreLedger, emulator: dynamoDb });
  const emulators = await startEmulators({
    ports,
    dynamoDb,
    dynamoDbPath: persisted?.dir,
    ledgerTable: persisted?.expectsTable ? 'existing' : 'create',
    topology: platformQueues(options.workers),
  }).catch((error: unknown) => {
    throw explainBindFailure(persisted?.explain(error) ?? error, stateDir, recorded);
  });
  stack.push(() => emulators.stop());
  if (persisted) {
    const { restoredItems } = await persisted.open(emulators);
    if (restoredItems !== undefined)
      logger.warn("ledger restored from the last clean stop's export: jobs recorded after it are lost", {
        items: restoredItems,
      });
    // Only a ledger that opened whole is exported (over the last good export) when the platform stops.
    stack.push(() => persisted.stopCleanly(emulators));
  }
  // Only the platform pushes; a test run's checkout reads its one repository; nobody else gets in.
  const access = new PlatformGitAccess();
  const git = await startGitServer({ root: paths.repos, port: ports.git, access }).catch((error: unknown) => {
    throw explainBindFailure(error, stateDir, recorded);
  });
  stack.push(() => git.close());
  await recordPorts(stateDir, {
    sqs: portOf(emulators.endpoints.sqs),
    dynamodb: portOf(emulators.endpoints.dynamodb),
    git: git.port,
  });
  // Before any worker runs: every lease in the ledger now belongs to a worker of a dead run.
  const ledger = localLedger(emulators);
  const unfinished = await releaseOrphanedLeases(ledger, Date.now());
  const events = new JsonlEventLog(paths.events);
  await announceMissedOutcomes(ledger, events, logger);
  // The DLQs are empty (fauxqs keeps them in memory): what the ledger says waits there goes back
  // first, then every later DLQ send is saved before it goes out (dlq-copies.ts).
  const dlqCopies = new DlqCopyStore(stateDir);
  const dlqs = await restoreDlqCopies({
    ledger,
    sqs: emulators.clients.sqs,
    dlqUrls: emulators.dlqUrls,
    store: dlqCopies,
    now: Date.now(),
  });
  saveDlqSends(emulators.clients.sqs, emulators.dlqUrls, dlqCopies);
  const readAccess: ReadAccess = {
    grant: (repoUrl) => {
      const name = git.repoNameOf(repoUrl);
      return name === undefined ? undefined : access.grantRead(name);
    },
  };
  const buildEventsUrl = emulators.topology.find((q) => q.role === 'buildEvents');
  const testRunner = new LocalTestRunner({
    stateDir: paths.testRuns,
    // Nothing of the platform's state (ledger data, repositories, ports) is a test command's to read.
    confidential: [stateDir],
    readAccess,
    ...(options.buildQuota !== undefined && { maxConcurrentBuilds: options.buildQuota }),
    // The child process's exit is the build's completion event, on the queue CodeBuild's events use on AWS.
    onFinished: async (completion) => {
      if (!buildEventsUrl) return;
      const QueueUrl = required(emulators.queueUrls, buildEventsUrl.name);
      await emulators.clients.sqs
        .send(new SendMessageCommand({ QueueUrl, MessageBody: localRunEventBody(completion) }))
        .catch((error: unknown) => {
          logger.warn('build completion not sent: the reconciler completes the job later', {
            buildId: completion.buildId,
            error: errorMessage(error),
          });
        });
    },
  });
  stack.push(() => testRunner.close());
  const testIsolation = describeIsolation(await testRunner.isolation());
  logIsolation(testIsolation, logger);

  const output = options.output === null ? undefined : (options.output ?? process.stdout);
  if (output) {
    // Stopped after the pollers (unwinding is last-in first-out), so it shows the last events too.
    const view: LiveView = await startLiveView({ ledger, output });
    stack.push(() => view.stop());
  }

  const prHost = new LocalPullRequestStore(stateDir, {
    branchHead: (url, branch) => resolveBranchHead(url, branch, access.platform),
  });
  const localParts: LocalWorkerParts = {
    workRoot: paths.work,
    testRunner,
    prHost,
    git: localGit(paths.work, logger, access.platform),
    parseBuildEvent: parseLocalRunEvent,
    // The allow-list of git hosts, locally: the platform's own git server, nothing else on this machine.
    gitHosts: ownGitServerPolicy(git.url),
  };
  const parts = options.decorateParts ? options.decorateParts(localParts) : localParts;
  const wiring: Wiring = { emulators, events, logger, parts, backoff: options.backoff ?? DEFAULT_BACKOFF };
  // A cancelled job's build is stopped by the runner that runs it, whatever wraps the parts' runner.
  const reconcilerRunner = {
    describe: (ids: readonly string[]) => parts.testRunner.describe(ids),
    stop: (buildId: string) => testRunner.stop(buildId),
  };
  const reconcilerDeps = localReconcilerDeps({
    resources: emulators,
    events,
    logger: logger.createChild({ persistentKeys: { function: 'build_reconciler' } }),
    runner: reconcilerRunner,
  });
  // What the last process left: the queues died with it, and with them any completion not yet
  // recorded. Runs it was killed in the middle of fail now (TEST_RUN_ERROR, redrivable), runs that
  // ended get their verdict, and verdicts never reported are reported, before any worker starts.
  await completeOrphanedRuns(testRunner, reconcilerDeps, logger);
  const pollers = await Promise.all(emulators.topology.map((spec) => startWorker(spec, wiring)));
  stack.push(() => Promise.all(pollers.map((p) => p.stop())).then(() => undefined));
  if (buildEventsUrl) {
    const reconciler = startReconciler(reconcilerDeps, options.reconcileIntervalMs ?? LOCAL_RECONCILE_INTERVAL_MS);
    stack.push(() => reconciler.stop());
  }

  const info: PlatformInfo = {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    stateDir,
    region: LOCAL_REGION,
    endpoints: emulators.endpoints,
    queueUrls: emulators.queueUrls,
    dlqUrls: emulators.dlqUrls,
    tableName: emulators.tableName,
    bucketName: emulators.bucketName,
    gitUrl: git.url,
    eventLog: paths.events,
    logFile: paths.log,
    testIsolation,
    jobTypes: JOB_TYPE_NAMES,
    ledger: options.persist === false ? 'memory' : 'disk',
  };
  await writeFileAtomic(paths.info, JSON.stringify(info, null, 2));
  stack.push(() => rm(paths.info, { force: true }));
  lock.describe({ endpoints: { sqs: info.endpoints.sqs, dynamodb: info.endpoints.dynamodb, git: info.gitUrl } });

  output?.write(readyLine(info, options.persist !== false, unfinished.length, dlqs, options.readyNotes ?? []));
  logger.info('local platform started', { stateDir, endpoints: info.endpoints, gitUrl: info.gitUrl });
  if (unfinished.length > 0)
    logger.warn('jobs left unfinished by the last run: re-send them', { jobIds: unfinished.map((j) => j.jobId) });
  if (dlqs.restored > 0) logger.info('DLQ messages of the last run put back', { jobs: dlqs.restored });
  if (dlqs.missing.length > 0)
    logger.warn('jobs the ledger lists on a DLQ have no saved copy to put back', {
      jobIds: dlqs.missing.map((j) => j.jobId),
    });
  return { info, emulators, git, events, unfinishedAtStart: unfinished.length, stop: stack.unwind };
}

/** The platform's log file, opened (an open that fails is an error here, not an 'error' event later). */
async function openLog(file: string): Promise<WriteStream> {
  const stream = createWriteStream(file, { flags: 'a' });
  await once(stream, 'open');
  return stream;
}

interface Wiring {
  readonly emulators: LocalEmulators;
  readonly events: JsonlEventLog;
  /** The platform's logger; each worker's handler gets a child that names the function. */
  readonly logger: Logger;
  readonly parts: LocalWorkerParts;
  readonly backoff: BackoffSettings;
}

async function startWorker(spec: QueueSpec, wiring: Wiring): Promise<QueuePoller> {
  const { emulators } = wiring;
  const name = spec.consumer;
  const logger = wiring.logger.createChild({ persistentKeys: { function: name } });
  const handler = localWorker(
    name,
    { resources: emulators, events: wiring.events, logger, backoff: wiring.backoff, worker: spec.worker },
    wiring.parts,
  );
  const queueUrl = required(emulators.queueUrls, spec.name);
  const { Attributes } = await emulators.clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  return startQueuePoller({
    name,
    sqs: emulators.clients.sqs,
    queueUrl,
    queueArn: required(Attributes ?? {}, 'QueueArn'),
    region: LOCAL_REGION,
    batchSize: spec.worker.batchSize,
    maxConcurrency: spec.worker.maxConcurrency,
    timeoutSeconds: spec.worker.timeoutSeconds,
    visibilityTimeoutSeconds: spec.visibilityTimeoutSeconds,
    order: pollingOrder(spec.role),
    handler,
    logger,
  });
}

/** Completes, through the build-completion path, the jobs of runs a killed platform left RUNNING. */
async function completeOrphanedRuns(runner: LocalTestRunner, deps: ReconcilerDeps, logger: Logger): Promise<void> {
  const orphans = await runner.takeOrphanedRuns();
  if (orphans.length > 0)
    logger.warn('test runs the last run of the platform left unfinished were recorded STOPPED', {
      buildIds: orphans.map((o) => o.buildId),
    });
  // A failure here (a status read, a write) is the periodic reconciler's to retry, not a reason not to start.
  await reconcileBuilds(deps, { afterRestart: true }).catch((error: unknown) =>
    deps.logger.error('reconciling at start failed: the reconciler tries again', { error: errorMessage(error) }),
  );
}

/** The build reconciler on an interval (an EventBridge schedule on AWS); one run at a time. */
function startReconciler(deps: ReconcilerDeps, intervalMs: number): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = running
      .then(() => reconcileBuilds(deps))
      .catch((error: unknown) => deps.logger.error('reconciler run failed', { error: errorMessage(error) }));
  }, intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

function readyLine(
  info: PlatformInfo,
  persist: boolean,
  unfinished: number,
  dlqs: RestoredDlqs,
  notes: readonly string[],
): string {
  const ledger = persist ? 'ledger on disk' : 'ledger in memory';
  return [
    `agent-jobs local platform ready (pid ${info.pid})`,
    `  sqs+s3   ${info.endpoints.sqs}   (queues in memory${persist ? '; DLQ messages kept across restarts' : ''})`,
    `  dynamodb ${info.endpoints.dynamodb}   (${ledger})`,
    `  git      ${info.gitUrl}/<repo>.git`,
    `  state    ${info.stateDir}   logs: ${info.logFile}`,
    `  tests    ${info.testIsolation.summary}`,
    ...(info.testIsolation.degraded ? [`  WARNING  ${info.testIsolation.degraded}`] : []),
    ...notes,
    ...(unfinished > 0
      ? [
          `  ${unfinished} job(s) of the last run have no outcome and their messages are gone: re-send them (agent-jobs unfinished lists them)`,
        ]
      : []),
    ...(dlqs.restored > 0
      ? [`  ${dlqs.restored} job(s) of the last run put back on their DLQ (agent-jobs dlq list)`]
      : []),
    ...(dlqs.missing.length > 0
      ? [
          `  ${dlqs.missing.length} job(s) the ledger lists on a DLQ have no message left to replay (agent-jobs unfinished lists the skipped ones)`,
        ]
      : []),
    '  Ctrl-C to stop',
    '',
  ].join('\n');
}

function required(values: Readonly<Record<string, string>>, key: string): string {
  const value = values[key];
  if (value === undefined) throw new Error(`local platform: no ${key} was created`);
  return value;
}

function closeStream(stream: WriteStream): Promise<void> {
  return new Promise((resolve) => stream.end(resolve));
}

/** Undo steps run last-in first-out, once, whatever fails along the way. */
class ShutdownStack {
  private readonly steps: Array<() => Promise<unknown>> = [];
  private unwound: Promise<void> | undefined;

  push(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }

  readonly unwind = (): Promise<void> => (this.unwound ??= this.run());

  private async run(): Promise<void> {
    const errors: unknown[] = [];
    for (const step of this.steps.reverse()) {
      await step().catch((error: unknown) => errors.push(error));
    }
    if (errors.length > 0) throw new AggregateError(errors, 'local platform: some parts did not stop cleanly');
  }
}
