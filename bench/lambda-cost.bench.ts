/**
 * Lambda cost of one test run: GB-seconds billed for a CodeBuild build of a given length, computed
 * from the invocations the handlers make, now and as recorded for the handler that waited for its
 * build (bench/baselines/lambda-cost-polling.json, written by this benchmark at commit 68fcf2f).
 *
 * The real handlers run over the emulators (dynalite, fauxqs) with CodeBuild mocked
 * (aws-sdk-client-mock: CodeBuild has no local stand-in): the run_tests function starts the build
 * and acknowledges; when the build's length has passed on a simulated clock, its "Build State
 * Change" event goes to the build-events queue and the build-events function records the verdict.
 * An invocation's billed duration is its measured wall time, rounded up to 1 ms; GB-seconds =
 * billed seconds x the function's memory (catalog) / 1024. Warm containers: one run is made first
 * and not counted. The scheduled reconciler costs the same whatever the traffic: reported per month.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CodeBuildClient, StartBuildCommand } from '@aws-sdk/client-codebuild';
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { BUILD_EVENTS, BUILD_RECONCILER, JOB_TYPES } from '../contract/job-types';
import { stringAttributes } from '../contract/messages';
import { parseCodeBuildEvent } from '../src/adapters/codebuild-builds';
import { CodeBuildTestRunner } from '../src/adapters/codebuild-test-runner';
import {
  localBuildEventsDeps,
  localCommandStageDeps,
  localReconcilerDeps,
  type LocalWorkerOptions,
} from '../src/compose/local';
import { createBuildEventsHandler } from '../src/core/build-completion';
import { reconcileBuilds } from '../src/core/build-reconciler';
import { jobAttributes, jobDigest, type StageMessage } from '../src/core/envelope';
import { createCommandStageHandler } from '../src/core/jobs/command-stage';
import { LOCAL_REGION, startEmulators, type LocalEmulators } from '../tools/local/emulators';
import { toSqsRecord } from '../tools/local/poller';
import { codeBuildStateChange } from '../test/support/codebuild-events';
import { fmt, type Benchmark, type BenchRow } from './harness';

const BUILD_MINUTES = [2, 10, 30, 45, 120] as const;
const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const MINUTES_PER_MONTH = 30 * 24 * 60;
/** Test runs per build length; the run with the median GB-seconds is reported. */
const RUNS = 5;

interface Invocation {
  readonly memoryMb: number;
  readonly billedMs: number;
}

export interface CostFigures {
  readonly buildMinutes: number;
  readonly invocations: number;
  readonly billedSeconds: number;
  readonly gbSeconds: number;
}

function summarize(buildMinutes: number, invocations: readonly Invocation[]): CostFigures {
  const billedMs = invocations.reduce((sum, i) => sum + i.billedMs, 0);
  const gbSeconds = invocations.reduce((sum, i) => sum + (i.billedMs / 1000) * (i.memoryMb / 1024), 0);
  return { buildMinutes, invocations: invocations.length, billedSeconds: billedMs / 1000, gbSeconds };
}

async function timed<T>(memoryMb: number, invocations: Invocation[], call: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await call();
  invocations.push({ memoryMb, billedMs: Math.ceil(performance.now() - started) });
  return result;
}

/** Receives one message of `queue` and invokes `handler` with it as the event source mapping does. */
async function deliver(
  emulators: LocalEmulators,
  queue: string,
  handler: (event: SQSEvent) => Promise<SQSBatchResponse>,
  memoryMb: number,
  invocations: Invocation[],
): Promise<void> {
  const { sqs } = emulators.clients;
  const queueUrl = emulators.queueUrls[queue] as string;
  const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] })))
    .Attributes?.QueueArn as string;
  const { Messages } = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 1,
      WaitTimeSeconds: 1,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  const message = Messages?.[0];
  if (!message) throw new Error(`nothing on ${queue}`);
  const response = await timed(memoryMb, invocations, () =>
    handler({ Records: [toSqsRecord(message, arn, LOCAL_REGION)] }),
  );
  if (response.batchItemFailures.length > 0) throw new Error(`${queue}: the handler reported a failure`);
  await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }));
}

async function oneTestRun(
  emulators: LocalEmulators,
  options: LocalWorkerOptions,
  clock: { now: number },
  buildMinutes: number,
): Promise<Invocation[]> {
  const stage = JOB_TYPES.run_tests.stage;
  const runner = new CodeBuildTestRunner(new CodeBuildClient({ region: LOCAL_REGION }), 'tests');
  const stageDeps = localCommandStageDeps('run_tests', { ...options, runner });
  const startStage = createCommandStageHandler('run_tests', stageDeps);
  const complete = createBuildEventsHandler(localBuildEventsDeps({ ...options, parse: parseCodeBuildEvent }));
  const job: StageMessage<'run_tests'> = {
    jobId: `cost-${randomUUID().slice(0, 8)}`,
    workspaceId: 'ws-cost',
    tenantId: 'bench',
    type: 'run_tests',
    createdAt: new Date(clock.now).toISOString(),
    payload: { command: 'npm test', timeoutSeconds: buildMinutes * 60 + 600 },
    pin: { sha: 'c'.repeat(40), repoUrl: 'https://git.example/acme/widgets.git', branch: 'agent/ws-cost' },
  };
  // What the sequencer leaves behind: the job FORWARDED with its pin, and the stage message.
  const { pin, ...envelope } = job;
  const owner = randomUUID();
  const { ledger } = stageDeps;
  await ledger.claim({
    job: envelope,
    digest: jobDigest(envelope),
    owner,
    now: clock.now,
    leaseMs: 60_000,
    consumer: 'sequencer',
  });
  await ledger.complete({ jobId: job.jobId, owner, now: clock.now, verdict: { status: 'FORWARDED', pin } });
  const { sqs } = emulators.clients;
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: emulators.queueUrls[stage.queue],
      MessageBody: JSON.stringify(job),
      MessageAttributes: stringAttributes(jobAttributes(job)),
    }),
  );

  const invocations: Invocation[] = [];
  await deliver(emulators, stage.queue, startStage, stage.memoryMb, invocations);
  const buildId = (await ledger.getJob(job.jobId))?.progress?.['buildId'] ?? '';
  // The build runs on CodeBuild; no function runs (or bills) meanwhile. Then CodeBuild's event arrives.
  clock.now += buildMinutes * 60_000;
  const event = codeBuildStateChange({
    buildId,
    status: 'SUCCEEDED',
    jobId: job.jobId,
    jobType: job.type,
    sha: pin.sha,
  });
  await sqs.send(
    new SendMessageCommand({ QueueUrl: emulators.queueUrls[BUILD_EVENTS.queue], MessageBody: JSON.stringify(event) }),
  );
  await deliver(emulators, BUILD_EVENTS.queue, complete, BUILD_EVENTS.memoryMb, invocations);
  const record = await ledger.getJob(job.jobId);
  if (record?.status !== 'SUCCEEDED')
    throw new Error(`run ${job.jobId} ended ${record?.status}: ${record?.error?.message ?? ''}`);
  return invocations;
}

function medianRun(runs: readonly CostFigures[]): CostFigures {
  return [...runs].sort((a, b) => a.gbSeconds - b.gbSeconds)[Math.floor(runs.length / 2)] as CostFigures;
}

interface Baseline {
  readonly handler: string;
  readonly figures: readonly CostFigures[];
}

export const bench: Benchmark = {
  name: 'lambda-cost',
  async run() {
    const baseline = JSON.parse(
      await readFile(join(__dirname, 'baselines', 'lambda-cost-polling.json'), 'utf8'),
    ) as Baseline;
    const emulators = await startEmulators();
    const codebuild = mockClient(CodeBuildClient);
    let builds = 0;
    codebuild.on(StartBuildCommand).callsFake(() => ({ build: { id: `tests:${++builds}` } }));
    const clock = { now: Date.parse('2026-12-01T09:00:00Z') };
    const options: LocalWorkerOptions = {
      resources: emulators,
      events: { publish: async () => undefined },
      logger: quiet,
      metrics: { count: () => undefined },
      clock: { now: () => clock.now },
    };
    const figures: CostFigures[] = [];
    const reconcilerRuns: Invocation[] = [];
    try {
      await oneTestRun(emulators, options, clock, 1); // warm-up, not counted
      for (const minutes of BUILD_MINUTES) {
        const runs: CostFigures[] = [];
        for (let i = 0; i < RUNS; i++)
          runs.push(summarize(minutes, await oneTestRun(emulators, options, clock, minutes)));
        figures.push(medianRun(runs));
      }
      const reconcile = localReconcilerDeps({
        ...options,
        runner: new CodeBuildTestRunner(new CodeBuildClient({ region: LOCAL_REGION }), 'tests'),
      });
      for (let i = 0; i < 5; i++)
        await timed(BUILD_RECONCILER.memoryMb, reconcilerRuns, () => reconcileBuilds(reconcile));
    } finally {
      codebuild.restore();
      await emulators.stop();
    }
    const rows: BenchRow[] = figures.map((after) => {
      const before = baseline.figures.find((b) => b.buildMinutes === after.buildMinutes);
      const was = before
        ? `${before.invocations} invocation(s), ${before.gbSeconds.toFixed(2)} GB-s`
        : 'not measured (over the 45-minute cap)';
      const ratio = before ? `, ${fmt.ratio(before.gbSeconds / after.gbSeconds)} less` : '';
      return {
        label: `${after.buildMinutes}-minute build`,
        value: `before: ${was}; now: ${after.invocations} invocations, ${after.gbSeconds.toFixed(4)} GB-s${ratio}`,
      };
    });
    const perRun = summarize(0, reconcilerRuns.slice(1));
    const perMonth = (perRun.gbSeconds / perRun.invocations) * (MINUTES_PER_MONTH / BUILD_RECONCILER.everyMinutes);
    rows.push({
      label: `reconciler (every ${BUILD_RECONCILER.everyMinutes} min, nothing due), whatever the traffic`,
      value: `${perMonth.toFixed(2)} GB-s per month`,
    });
    return {
      title: 'Lambda cost of one test run',
      description: [
        'GB-seconds billed per test run, from the invocations of the real handlers over the emulators, CodeBuild mocked. Now: the',
        `run_tests function starts the build and acknowledges (${JOB_TYPES.run_tests.stage.memoryMb} MB); the build's completion event is recorded by the build-events`,
        `function (${BUILD_EVENTS.memoryMb} MB); nothing runs while the build does. Before (${baseline.handler}): measured by this benchmark at commit 68fcf2f,`,
        'where the function slept between polls every 20 s for the whole build (512 MB), billed for it. Warm containers; wall time as billed duration;',
        `the median of ${RUNS} test runs per build length.`,
        '',
        'Command: `npm run bench lambda-cost`',
      ].join('\n'),
      rows,
    };
  },
};
