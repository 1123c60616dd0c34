/**
 * The command stages (run_tests, run_lint and any stage declared with `commandStage` in
 * contract/job-types.ts): run one shell command at the commit the sequencer pinned, at most one
 * build per job and run number. The processor starts the build and returns: nothing waits for it.
 * It records a start mark before StartBuild and the build id after it, so a redelivery after a crash
 * finds the build instead of starting another, then records the job RUNNING and acknowledges the
 * message. The build's completion (build-completion.ts) records the verdict; the reconciler
 * (build-reconciler.ts) does when the completion event never comes.
 *
 * Below the processor, the pure rules shared with the CodeBuild and local runners: what command
 * runs, what the build is told, how a finished run becomes a job result.
 */
import { createHash } from 'node:crypto';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { NOT_CONFIGURED, commandStageOf, type CommandJobType, type JobType } from '../../../contract/job-types';
import { BUILD_DUE_MARGIN_SECONDS, BUILD_QUEUED_TIMEOUT_MINUTES, TEST_BUILD_ENV } from '../../../contract/runtime-env';
import { parseStageMessageOf, type StageMessage } from '../envelope';
import { processStandardBatch } from '../fifo-batch';
import {
  createRecordProcessor,
  type JobContext,
  type JobProcessor,
  type PipelineDeps,
  type RunResult,
} from '../pipeline';
import type { BuildFinder, CommandRun, FinishedRunStatus, JobFailure, TestRunner } from '../ports';

export interface CommandStageDeps extends PipelineDeps {
  /** A runner whose start is not idempotent for ever (CodeBuild) also finds unrecorded builds. */
  readonly runner: TestRunner & Partial<BuildFinder>;
  /** The build timeout when the job names none (the command runner's default). */
  readonly defaultTimeoutSeconds: number;
}

type CommandJob = StageMessage<CommandJobType>;

class CommandStageProcessor implements JobProcessor<CommandJob> {
  constructor(
    private readonly type: CommandJobType,
    private readonly deps: CommandStageDeps,
  ) {}

  parse(body: string): CommandJob {
    return parseStageMessageOf(this.type, body);
  }

  async run(job: CommandJob, ctx: JobContext): Promise<RunResult> {
    const timeoutSeconds = job.payload.timeoutSeconds ?? this.deps.defaultTimeoutSeconds;
    await this.startOrFind(job, timeoutSeconds, ctx);
    return {
      verdict: {
        status: 'RUNNING',
        dueAt: this.deps.clock.now() + dueAfterMs(timeoutSeconds),
        stageMessage: JSON.stringify(job),
      },
    };
  }

  private async startOrFind(job: CommandJob, timeoutSeconds: number, ctx: JobContext): Promise<string> {
    const progress = ctx.claimed.progress ?? {};
    const recorded = progress[PROGRESS.buildId];
    if (recorded) {
      ctx.logger.info('the build was started by an earlier attempt', { buildId: recorded });
      return recorded;
    }
    // An earlier attempt's start request names the same run (its key): a build it started is found, not started twice.
    const earlierRequest = progress[PROGRESS.startRequestedAt];
    const requested = { [PROGRESS.startRequestedAt]: earlierRequest ?? new Date(this.deps.clock.now()).toISOString() };
    const runNumber = ctx.claimed.run ?? 0;
    const run: CommandRun = {
      job,
      run: runNumber,
      key: runKey(job, runNumber, requested.startRequestedAt),
      command: commandOf(job),
      timeoutSeconds,
    };
    // An earlier attempt asked for a build and died before recording it: find that build first.
    const unrecorded = earlierRequest ? await this.deps.runner.findBuild?.(run) : undefined;
    if (unrecorded) {
      await ctx.recordProgress({ ...requested, [PROGRESS.buildId]: unrecorded });
      ctx.logger.info('found the build an earlier attempt started', { buildId: unrecorded });
      return unrecorded;
    }
    if (!earlierRequest) await ctx.recordProgress(requested);
    const { buildId } = await this.deps.runner.start(run);
    // Before the job is RUNNING: a crash from here on finds this build instead of starting a second one.
    await ctx.recordProgress({ ...requested, [PROGRESS.buildId]: buildId });
    ctx.logger.info('build started', { buildId, sha: run.job.pin.sha, run: run.run });
    return buildId;
  }
}

/** The stage queue's batch handler of one command stage over injected adapters (src/compose builds them). */
export function createCommandStageHandler(
  type: CommandJobType,
  deps: CommandStageDeps,
): (event: SQSEvent) => Promise<SQSBatchResponse> {
  const process = createRecordProcessor(new CommandStageProcessor(type, deps), deps);
  return (event) => processStandardBatch(event.Records, process);
}

/** Bytes of build output kept in the result: it lands in a DynamoDB item and an EventBridge event. */
export const LOG_TAIL_BYTES = 8 * 1024;

/**
 * Keys of JobRecord.progress. `startRequestedAt` is written before the build is started, so a
 * delivery that finds it without a `buildId` knows an earlier attempt may have started a build it
 * never recorded (a crash in between) and looks for it before starting one.
 */
export const PROGRESS = { buildId: 'buildId', startRequestedAt: 'startRequestedAt' } as const;

/** The declaration of a command stage; throws for a type that is not one. */
function commandSpec(type: JobType) {
  const spec = commandStageOf(type);
  if (!spec) throw new Error(`${type} is not a command stage (contract/job-types.ts)`);
  return spec;
}

/** The job's command, or its stage's default. */
export function commandOf(job: CommandJob): string {
  return job.payload.command ?? commandSpec(job.type).defaultCommand;
}

/**
 * How long after the start a job may wait for its build's completion before the reconciler asks:
 * the build's queued timeout and timeout, plus a margin for a late event.
 */
export function dueAfterMs(timeoutSeconds: number): number {
  return (BUILD_QUEUED_TIMEOUT_MINUTES * 60 + timeoutSeconds + BUILD_DUE_MARGIN_SECONDS) * 1000;
}

/** The variables the build receives (lib/'s buildspec reads the same names from contract/). */
export function buildEnvironment(
  run: CommandRun,
): Record<(typeof TEST_BUILD_ENV)[keyof typeof TEST_BUILD_ENV], string> {
  return {
    [TEST_BUILD_ENV.repoUrl]: run.job.pin.repoUrl,
    [TEST_BUILD_ENV.commitSha]: run.job.pin.sha,
    [TEST_BUILD_ENV.testCommand]: run.command,
    [TEST_BUILD_ENV.jobId]: run.job.jobId,
    [TEST_BUILD_ENV.jobType]: run.job.type,
    [TEST_BUILD_ENV.run]: String(run.run),
    [TEST_BUILD_ENV.runKey]: run.key,
  };
}

/**
 * The key of one run of one job: its type, id, run number and the time its stage first asked for
 * the build (recorded before the start, PROGRESS.startRequestedAt). A redelivery after a crash
 * between the start and recording the build id has the same key, so it finds the same build; an
 * operator's redrive (a new run number) has a new one; and so does a job sent again under the same
 * id after the ledger forgot the first (an in-memory ledger restarted, a record past its TTL), so
 * an earlier job's build is never taken for its own.
 */
export function runKey(job: Pick<CommandJob, 'type' | 'jobId'>, run: number, startRequestedAt: string): string {
  return runDigest(job, run, startRequestedAt).slice(0, RUN_KEY_LENGTH);
}

/** Hex characters of a run key: 64 bits, unique among the runs of one job id. */
const RUN_KEY_LENGTH = 16;

function runDigest(job: Pick<CommandJob, 'type' | 'jobId'>, run: number, startRequestedAt: string): string {
  return createHash('sha256').update(`${job.type}:${job.jobId}:${run}:${startRequestedAt}`).digest('hex');
}

/** Idempotency token for starting a run's build: the same run (its key) gets the same build back. */
export function buildIdempotencyToken(run: Pick<CommandRun, 'key'>): string {
  return createHash('sha256').update(`build:${run.key}`).digest('hex');
}

/** The last `maxBytes` of `text`, cut on a character boundary. */
export function tail(text: string, maxBytes = LOG_TAIL_BYTES): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  // Drop UTF-8 continuation bytes (10xxxxxx) at the cut so no character is split.
  let start = bytes.length - maxBytes;
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
  return bytes.subarray(start).toString('utf8');
}

export interface CommandResult extends Record<string, unknown> {
  readonly verdict: 'passed' | 'failed';
  /** How the verdict reads for this stage: "tests passed", "lint failed". */
  readonly summary: string;
  readonly exitCode: number | null;
  readonly logTail: string;
  readonly sha: string;
  readonly buildId: string;
  readonly durationMs?: number;
}

/** The parts of a job a result names. */
export interface ResultSubject {
  readonly type: JobType;
  readonly sha: string;
}

/**
 * The verdict of a finished build. A failing command is a successful job with verdict 'failed'.
 * A build that ended without a verdict (FAULT, TIMED_OUT, STOPPED, a failed checkout) fails the job
 * with TEST_RUN_ERROR: the job allows one build per run, a TIMED_OUT run would time out again, and
 * a STOPPED build was stopped on purpose; an operator's redrive starts a new run.
 */
export function commandVerdict(
  status: FinishedRunStatus,
  subject: ResultSubject,
  buildId: string,
): { status: 'SUCCEEDED'; result: CommandResult } | { status: 'FAILED'; error: JobFailure } {
  const { subject: noun } = commandSpec(subject.type);
  switch (status.state) {
    case 'PASSED':
    case 'FAILED': {
      const verdict = status.state === 'PASSED' ? 'passed' : 'failed';
      return {
        status: 'SUCCEEDED',
        result: {
          verdict,
          summary: verdict === 'failed' && notConfigured(status) ? `${noun} not configured` : `${noun} ${verdict}`,
          exitCode: status.exitCode,
          logTail: tail(status.logTail),
          sha: subject.sha,
          buildId,
          ...(status.durationMs === undefined ? {} : { durationMs: status.durationMs }),
        },
      };
    }
    case 'ERROR':
      return {
        status: 'FAILED',
        error: { reason: 'TEST_RUN_ERROR', message: `${noun} run ${status.status}: ${status.message}` },
      };
  }
}

/** The default command found nothing to run (NOT_CONFIGURED): still a failed verdict, worded as what it is. */
function notConfigured(status: { readonly exitCode: number | null; readonly logTail: string }): boolean {
  const lastLine = status.logTail.trimEnd().split('\n').pop() ?? '';
  return status.exitCode === NOT_CONFIGURED.exitCode && NOT_CONFIGURED.lastLine.test(lastLine);
}
