/**
 * The run_tests stage: runs a workspace's tests at the commit the sequencer pinned, at most one
 * build per job. The build id is recorded in the ledger before waiting, so a redelivery resumes
 * that build instead of starting another; a mark recorded before starting it tells a redelivery to
 * look for a build a crashed attempt started but never recorded (PROGRESS in core). A build that
 * outlives the invocation is handed to a later delivery: the record is reported as a batch failure
 * (the pipeline releases the lease and its back-off is the visibility delay), and the next delivery
 * resumes polling the recorded build. Everything else is the shared pipeline (lambda/core/pipeline.ts).
 */
import { setTimeout as sleepFor } from 'node:timers/promises';
import { CodeBuildClient } from '@aws-sdk/client-codebuild';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { JOB_TYPES } from '../../contract/job-types';
import { ENV } from '../../contract/runtime-env';
import { parseStageMessage, type StageMessage } from '../core/envelope';
import { InvalidJobError } from '../core/errors';
import { processStandardBatch } from '../core/fifo-batch';
import { createRecordProcessor, type JobContext, type JobProcessor, type PipelineDeps, type RunResult } from '../core/pipeline';
import type { TestRunner } from '../core/ports';
import { BuildStillRunningError, DEFAULT_WAIT_POLICY, PROGRESS, mustYield, testResult, type BuildFinder, type WaitPolicy } from '../core/run-tests';
import { CodeBuildTestRunner } from '../adapters/codebuild-test-runner';
import { awsClientConfig, awsPipelineDeps, logger, requireEnv } from '../adapters/runtime';

export interface RunTestsDeps extends PipelineDeps {
  /** A runner whose start is not idempotent for ever (CodeBuild) also finds unrecorded builds. */
  readonly runner: TestRunner & Partial<BuildFinder>;
  /** @default DEFAULT_WAIT_POLICY */
  readonly wait?: WaitPolicy;
  /** Pause between polls; tests inject one that advances their clock. @default node:timers setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** The part of the Lambda context the handler reads. */
export type InvocationContext = Pick<Context, 'getRemainingTimeInMillis'>;

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
    const message = parseStageMessage(body);
    if (message.type !== 'run_tests') throw new InvalidJobError(`the run-tests queue received a ${message.type} job`);
    return message;
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

/** The Lambda handler over injected adapters: AWS ones below, local ones from the local platform. */
export function createRunTestsHandler(deps: RunTestsDeps): (event: SQSEvent, context: InvocationContext) => Promise<SQSBatchResponse> {
  return (event, context) => processStandardBatch(event.Records, createRecordProcessor(new RunTestsProcessor(deps, context), deps));
}

/** AWS adapters from the environment the stack sets; read at the first invocation (cold start). */
function awsDeps(): RunTestsDeps {
  return {
    ...awsPipelineDeps('stage', JOB_TYPES.run_tests.stage),
    runner: new CodeBuildTestRunner(new CodeBuildClient(awsClientConfig()), requireEnv(ENV.testRunnerProject)),
  };
}

let instance: ReturnType<typeof createRunTestsHandler> | undefined;

export const handler = (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
  logger.addContext(context);
  return (instance ??= createRunTestsHandler(awsDeps()))(event, context);
};
