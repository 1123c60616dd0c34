/**
 * Lambda cost of one test run: GB-seconds billed to the run_tests function for a CodeBuild build
 * of a given length, computed from the invocations the handler makes.
 *
 * The real run_tests handler (src/core/jobs/run-tests.ts) runs over the emulators (dynalite,
 * fauxqs) with CodeBuild mocked (aws-sdk-client-mock: CodeBuild has no local stand-in); the mocked
 * build is IN_PROGRESS until its length has passed on a simulated clock, then SUCCEEDED. The
 * handler waits with the catalog's wait policy (a poll every 20 s, heart-beating), and its sleeps
 * advance the simulated clock. An invocation's billed duration is its measured wall time plus the
 * time it slept on the simulated clock (Lambda bills a sleeping invocation), rounded up to 1 ms;
 * GB-seconds = billed seconds x the function's memory (catalog) / 1024. A build that outlives the
 * function's timeout is handed to the next delivery, which is one more invocation.
 *
 * `npm run bench lambda-cost` writes the figures to bench/baselines/lambda-cost-polling.json too,
 * so a later change of the handler can be compared with this one.
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BatchGetBuildsCommand, CodeBuildClient, StartBuildCommand } from '@aws-sdk/client-codebuild';
import { DeleteMessageCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { JOB_TYPES } from '../contract/job-types';
import { CodeBuildTestRunner } from '../src/adapters/codebuild-test-runner';
import { localRunTestsDeps } from '../src/compose/local';
import { jobAttributes, jobDigest, type StageMessage } from '../src/core/envelope';
import { DEFAULT_WAIT_POLICY, createRunTestsHandler } from '../src/core/jobs/run-tests';
import { LOCAL_REGION, startEmulators, type LocalEmulators } from '../src/local/emulators';
import { toSqsRecord } from '../src/local/poller';
import type { Benchmark, BenchRow } from './harness';

const BUILD_MINUTES = [2, 10, 30, 45] as const;
const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

interface Invocation {
  readonly fn: string;
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

async function oneTestRun(emulators: LocalEmulators, buildMinutes: number): Promise<Invocation[]> {
  const codebuild = mockClient(CodeBuildClient);
  const settings = JOB_TYPES.run_tests.stage;
  let now = Date.parse('2026-12-01T09:00:00Z');
  let slept = 0;
  const buildId = `tests:${randomUUID()}`;
  let buildEndsAt = Number.POSITIVE_INFINITY;
  codebuild.on(StartBuildCommand).callsFake(() => {
    buildEndsAt = now + buildMinutes * 60_000;
    return { build: { id: buildId } };
  });
  codebuild.on(BatchGetBuildsCommand).callsFake(() => ({ builds: [{ id: buildId, buildStatus: now >= buildEndsAt ? 'SUCCEEDED' : 'IN_PROGRESS' }] }));
  try {
    const deps = localRunTestsDeps({
      resources: emulators,
      events: { publish: async () => undefined },
      logger: quiet,
      metrics: { count: () => undefined },
      clock: { now: () => now },
      // A hand-over's back-off is time nobody is billed for: zero, so the next delivery is the next receive.
      backoff: { baseSeconds: 0, capSeconds: 0 },
      runner: new CodeBuildTestRunner(new CodeBuildClient({ region: LOCAL_REGION }), 'tests'),
      wait: DEFAULT_WAIT_POLICY,
      sleep: async (ms) => {
        now += ms;
        slept += ms;
      },
    });
    const handler = createRunTestsHandler(deps);
    const job: StageMessage<'run_tests'> = {
      jobId: `cost-${randomUUID().slice(0, 8)}`,
      workspaceId: 'ws-cost',
      tenantId: 'bench',
      type: 'run_tests',
      createdAt: new Date(now).toISOString(),
      payload: { command: 'npm test' },
      pin: { sha: 'c'.repeat(40), repoUrl: 'https://git.example/acme/widgets.git', branch: 'agent/ws-cost' },
    };
    // What the sequencer leaves behind: the job FORWARDED with its pin, and the stage message.
    const { pin, ...envelope } = job;
    const owner = randomUUID();
    await deps.ledger.claim({ job: envelope, digest: jobDigest(envelope), owner, now, leaseMs: 60_000, consumer: 'sequencer', redrive: false });
    await deps.ledger.complete({ jobId: job.jobId, owner, now, verdict: { status: 'FORWARDED', pin } });
    const queueUrl = emulators.queueUrls[settings.queue] as string;
    const { sqs } = emulators.clients;
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(job), MessageAttributes: Object.fromEntries(Object.entries(jobAttributes(job)).map(([k, v]) => [k, { DataType: 'String', StringValue: v }])) }));
    const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }))).Attributes?.QueueArn as string;

    const invocations: Invocation[] = [];
    for (let delivery = 0; delivery < settings.maxReceiveCount + 1; delivery++) {
      const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 1, MessageSystemAttributeNames: ['All'], MessageAttributeNames: ['All'] }));
      const message = Messages?.[0];
      if (!message) break;
      const deadline = now + settings.timeoutSeconds * 1000;
      slept = 0;
      const wall = performance.now();
      const response = await handler({ Records: [toSqsRecord(message, arn, LOCAL_REGION)] }, { getRemainingTimeInMillis: () => deadline - now });
      const billedMs = Math.ceil(performance.now() - wall + slept);
      invocations.push({ fn: 'run_tests', memoryMb: settings.memoryMb, billedMs });
      if (response.batchItemFailures.length === 0) {
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }));
        break;
      }
    }
    const record = await deps.ledger.getJob(job.jobId);
    if (record?.status !== 'SUCCEEDED') throw new Error(`run ${job.jobId} ended ${record?.status}: ${record?.error?.message ?? ''}`);
    return invocations;
  } finally {
    codebuild.restore();
  }
}

export const bench: Benchmark = {
  name: 'lambda-cost',
  async run() {
    const emulators = await startEmulators();
    const figures: CostFigures[] = [];
    try {
      for (const minutes of BUILD_MINUTES) figures.push(summarize(minutes, await oneTestRun(emulators, minutes)));
    } finally {
      await emulators.stop();
    }
    await writeFile(join(__dirname, 'baselines', 'lambda-cost-polling.json'), `${JSON.stringify({ handler: 'polling (run_tests waits for its build)', figures }, null, 2)}\n`);
    const rows: BenchRow[] = figures.map((f) => ({
      label: `${f.buildMinutes}-minute build`,
      value: `${f.invocations} invocation(s), ${f.billedSeconds.toFixed(1)} s billed, ${f.gbSeconds.toFixed(2)} GB-s`,
    }));
    return {
      title: 'Lambda cost of one test run',
      description: [
        'GB-seconds billed per test run, from the invocations of the real run_tests handler over the emulators, CodeBuild mocked',
        '(the build is IN_PROGRESS until its length has passed on a simulated clock). An invocation bills its wall time plus the',
        `time it slept waiting for the build; memory from the catalog (${JOB_TYPES.run_tests.stage.memoryMb} MB). Poll every ${DEFAULT_WAIT_POLICY.pollIntervalMs / 1000} s.`,
        '',
        'Command: `npm run bench lambda-cost`',
      ].join('\n'),
      rows,
    };
  },
};
