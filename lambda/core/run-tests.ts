/**
 * Pure rules of the run_tests stage, shared by the CodeBuild runner, the local runner and the
 * handler: what command runs, how a finished run becomes a job result, when to stop waiting.
 */
import { createHash } from 'node:crypto';
import type { StageMessage } from './envelope';
import { PermanentJobError, TransientJobError } from './errors';
import type { TestRunStatus } from './ports';
import { TEST_BUILD_ENV } from '../../contract/runtime-env';

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

/** A runner that can find the build an earlier attempt started for a job (the crash window above). */
export interface BuildFinder {
  findBuild(job: StageMessage<'run_tests'>): Promise<string | undefined>;
}

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
