/**
 * The run_tests stage: runs a workspace's tests at the commit the sequencer pinned, at most one
 * build per job. The build id is recorded in the ledger before waiting, so a redelivery resumes
 * that build instead of starting another; a mark recorded before starting it tells a redelivery to
 * look for a build a crashed attempt started but never recorded (PROGRESS). A build that outlives
 * the invocation is handed to a later delivery: the record is reported as a batch failure (the
 * pipeline releases the lease and its back-off is the visibility delay), and the next delivery
 * resumes polling the recorded build. Everything else is the shared pipeline (../pipeline.ts).
 *
 * Below the processor, the pure rules shared with the CodeBuild and local runners: what command
 * runs, how a finished run becomes a job result, when to stop waiting.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleepFor } from 'node:timers/promises';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { TEST_BUILD_ENV } from '../../../contract/runtime-env';
import { parseStageMessageOf, type StageMessage } from '../envelope';
import { PermanentJobError, TransientJobError } from '../errors';
import { processStandardBatch } from '../fifo-batch';
import { createRecordProcessor, type JobContext, type JobProcessor, type PipelineDeps, type RunResult } from '../pipeline';
import type { BuildFinder, TestRunner, TestRunStatus } from '../ports';

export interface RunTestsDeps extends PipelineDeps {
  /** A runner whose start is not idempotent for ever (CodeBuild) also finds unrecorded builds. */
  readonly runner: TestRunner & Partial<BuildFinder>;
  /** @default DEFAULT_WAIT_POLICY */
  readonly wait?: WaitPolicy;
  /** Pause between polls; tests inject one that advances their clock. @default node:timers setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** The part of the Lambda context the handler reads. */
export interface InvocationContext {
  getRemainingTimeInMillis(): number;
}

type RunTestsJob = StageMessage<'run_tests'>;

class RunTestsProcessor implements JobProcessor<RunTestsJob> {
  private readonly wait: WaitPolicy;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(
    private readonly deps: RunTestsDeps,
    private readonly invocation: InvocationContext,
  ) {
    this.wait = deps.wait ?? DEFAULT_WAIT_POLICY;
    this.sleep = deps.sleep ?? ((ms) => sleepFor(ms));
  }

  parse(body: string): RunTestsJob {
    return parseStageMessageOf('run_tests', body);
  }

  async run(job: RunTestsJob, ctx: JobContext): Promise<RunResult> {
    const buildId = await this.startOrResume(job, ctx);
    for (;;) {
      const status = await this.deps.runner.poll(buildId);
      if (status.state !== 'RUNNING') {
        ctx.logger.info('build finished', { buildId, state: status.state });
        return { verdict: { status: 'SUCCEEDED', result: testResult(status, job, buildId) } };
      }
      if (mustYield(this.invocation.getRemainingTimeInMillis(), this.wait)) {
        // Not finished, not failed: the pipeline releases the lease and backs off; the next delivery resumes.
        ctx.logger.info('build outlives this invocation: handing it to the next delivery', { buildId });
        throw new BuildStillRunningError(buildId);
      }
      await ctx.heartbeat();
      await this.sleep(this.wait.pollIntervalMs);
    }
  }

  private async startOrResume(job: RunTestsJob, ctx: JobContext): Promise<string> {
    const progress = ctx.claimed.progress ?? {};
    const recorded = progress[PROGRESS.buildId];
    if (recorded) {
      ctx.logger.info('resuming the recorded build', { buildId: recorded });
      return recorded;
    }
    const startRequestedAt = progress[PROGRESS.startRequestedAt];
    // An earlier attempt asked for a build and died before recording it: find that build first.
    const unrecorded = startRequestedAt ? await this.deps.runner.findBuild?.(job) : undefined;
    if (startRequestedAt && unrecorded) {
      await ctx.recordProgress({ [PROGRESS.startRequestedAt]: startRequestedAt, [PROGRESS.buildId]: unrecorded });
      ctx.logger.info('resuming the build an earlier attempt started', { buildId: unrecorded });
      return unrecorded;
    }
    const requested = { [PROGRESS.startRequestedAt]: new Date(this.deps.clock.now()).toISOString() };
    await ctx.recordProgress(requested);
    const { buildId } = await this.deps.runner.start(job);
    // Before any wait: a crash from here on resumes this build instead of starting a second one.
    await ctx.recordProgress({ ...requested, [PROGRESS.buildId]: buildId });
    ctx.logger.info('build started', { buildId, sha: job.pin.sha });
    return buildId;
  }
}

/** The run-tests queue's batch handler over injected adapters (src/compose builds them for AWS and locally). */
export function createRunTestsHandler(deps: RunTestsDeps): (event: SQSEvent, context: InvocationContext) => Promise<SQSBatchResponse> {
  return (event, context) => processStandardBatch(event.Records, createRecordProcessor(new RunTestsProcessor(deps, context), deps));
}

/**
 * Used when the job names no command: `npm test` (after `npm ci` when a lockfile is present) when
 * package.json has a test script, else `./test.sh` when present, else exit 2 with a message. One
 * shell line, always sent as TEST_COMMAND, so CodeBuild (which cannot look into the repository
 * before the build) and the local runner behave the same.
 */
export const DEFAULT_TEST_COMMAND =
  `if [ -f package.json ] && node -e "process.exit(require('./package.json').scripts?.test ? 0 : 1)"; then ` +
  `{ [ ! -f package-lock.json ] || npm ci; } && npm test; ` +
  `elif [ -f test.sh ]; then sh ./test.sh; ` +
  `else echo 'no test command: give payload.command, a package.json test script or test.sh' >&2; exit 2; fi`;

/** Bytes of build output kept in the result: it lands in a DynamoDB item and an EventBridge event. */
export const LOG_TAIL_BYTES = 8 * 1024;

/**
 * Keys of JobRecord.progress. `startRequestedAt` is written before the build is started, so a
 * delivery that finds it without a `buildId` knows an earlier attempt may have started a build it
 * never recorded (a crash in between) and looks for it before starting one.
 */
export const PROGRESS = { buildId: 'buildId', startRequestedAt: 'startRequestedAt' } as const;

export function testCommand(job: StageMessage<'run_tests'>): string {
  return job.payload.command ?? DEFAULT_TEST_COMMAND;
}

/** The variables the build receives (lib/'s buildspec reads the same names from contract/). */
export function buildEnvironment(job: StageMessage<'run_tests'>): Record<(typeof TEST_BUILD_ENV)[keyof typeof TEST_BUILD_ENV], string> {
  return {
    [TEST_BUILD_ENV.repoUrl]: job.pin.repoUrl,
    [TEST_BUILD_ENV.commitSha]: job.pin.sha,
    [TEST_BUILD_ENV.testCommand]: testCommand(job),
    [TEST_BUILD_ENV.jobId]: job.jobId,
  };
}

/**
 * Idempotency token for starting a job's build: derived from the job id alone, so a redelivery that
 * crashed between starting the build and recording its id gets the same build back.
 */
export function buildIdempotencyToken(jobId: string): string {
  return createHash('sha256').update(`run_tests:${jobId}`).digest('hex');
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

export interface RunTestsResult extends Record<string, unknown> {
  readonly verdict: 'passed' | 'failed';
  readonly exitCode: number | null;
  readonly logTail: string;
  readonly sha: string;
  readonly buildId: string;
  readonly durationMs?: number;
}

/**
 * The build ended without a test verdict (FAULT, TIMED_OUT, STOPPED, a failed checkout).
 * Permanent: the job allows one build, a TIMED_OUT run would time out again, and a STOPPED build
 * was stopped on purpose; an operator redrives the job from the DLQ to run it again.
 */
export class TestRunError extends PermanentJobError {
  constructor(
    readonly buildStatus: string,
    message: string,
  ) {
    super('TEST_RUN_ERROR', `test run ${buildStatus}: ${message}`);
  }
}

/** Turns a finished run into the job result: failed tests are a successful job with verdict 'failed'. */
export function testResult(status: TestRunStatus, job: StageMessage<'run_tests'>, buildId: string): RunTestsResult {
  switch (status.state) {
    case 'PASSED':
    case 'FAILED':
      return {
        verdict: status.state === 'PASSED' ? 'passed' : 'failed',
        exitCode: status.exitCode,
        logTail: tail(status.logTail),
        sha: job.pin.sha,
        buildId,
        ...(status.durationMs === undefined ? {} : { durationMs: status.durationMs }),
      };
    case 'ERROR':
      throw new TestRunError(status.status, status.message);
    case 'RUNNING':
      throw new Error('testResult called on a running build');
  }
}

/** How the handler waits for a build. */
export interface WaitPolicy {
  /** Pause between two polls (each one also heartbeats the lease and the message visibility). */
  readonly pollIntervalMs: number;
  /** Stop waiting when less than this is left of the invocation (time to record and answer). */
  readonly reserveMs: number;
}

export const DEFAULT_WAIT_POLICY: WaitPolicy = { pollIntervalMs: 20_000, reserveMs: 30_000 };

/** True when another poll interval would eat into the reserve: hand the build to a later delivery. */
export function mustYield(remainingMs: number, policy: WaitPolicy): boolean {
  return remainingMs - policy.pollIntervalMs < policy.reserveMs;
}

/**
 * The build is still running when this invocation must end. Not a failure of the build: the
 * pipeline reports the record as a batch failure with its back-off as the visibility delay, and the
 * next delivery resumes the recorded build. Transient, so it counts against the receive budget:
 * a build must end within about maxReceiveCount invocations.
 */
export class BuildStillRunningError extends TransientJobError {
  constructor(readonly buildId: string) {
    super(`build ${buildId} still running: the next delivery resumes it`);
  }
}
