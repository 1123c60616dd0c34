/**
 * A command stage end to end without waiting: the stage starts the build and acknowledges, the
 * build's completion event records the verdict, the reconciler covers a missing event. Over
 * dynalite + fauxqs (the stage queue, the build-events queue, the DLQs); CodeBuild is mocked with
 * aws-sdk-client-mock because it has no local stand-in. Messages are received and deleted as the
 * event source mapping does; back-off is zero so a retry is the next receive.
 */
import { randomUUID } from 'node:crypto';
import {
  BatchGetBuildsCommand,
  CodeBuildClient,
  ListBuildsForProjectCommand,
  StartBuildCommand,
  StopBuildCommand,
  type Build,
} from '@aws-sdk/client-codebuild';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { PurgeQueueCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { commandStageOf, JOB_TYPE_NAMES } from '../../contract/job-types';
import { DEFERRAL_ATTRIBUTES, REDRIVE_ATTRIBUTE, stringAttributes } from '../../contract/messages';
import {
  BUILD_DUE_MARGIN_SECONDS,
  JOB_METRICS,
  REPORT_GRACE_SECONDS,
  type JobMetricName,
} from '../../contract/runtime-env';
import { checkoutSecretName, SecretsManagerBuildCheckout } from '../../src/adapters/build-checkout';
import { parseCodeBuildEvent } from '../../src/adapters/codebuild-builds';
import { CodeBuildTestRunner } from '../../src/adapters/codebuild-test-runner';
import { localCommandStageDeps, localCompletionDeps } from '../../src/compose/local';
import { createBuildEventsHandler } from '../../src/core/build-completion';
import { reconcileBuilds } from '../../src/core/build-reconciler';
import { jobAttributes, jobDigest, type StageMessage } from '../../src/core/envelope';
import { createCommandStageHandler, dueAfterMs, runKey } from '../../src/core/jobs/command-stage';
import type { EventPublisher } from '../../src/core/ports';
import { REGION } from '../assembly/cloud-assembly';
import { newSecretArn, startSecretsManager } from '../assembly/stand-ins';
import { codeBuildStateChange } from '../support/codebuild-events';
import { withEmulators } from '../support/emulators';
import { recordSends } from '../support/sqs-sends';
import { deliverOne, emulatorWorkerOptions, LEASE_SECONDS, stageHarness, type StageHarness } from './staged-harness';

const BUILD_EVENTS = 'build-events';
const sha = 'b'.repeat(40);
const HOUR = 3600;
const codebuild = mockClient(CodeBuildClient);

describe('command stage: start, acknowledge, complete by event (pipeline + a DynamoDB emulator + fauxqs)', () => {
  const emulators = withEmulators();
  let h: StageHarness;
  let builds: number;

  beforeEach(async () => {
    // Every test starts from empty queues: a message a test leaves behind is not the next one's.
    const { queueUrls, dlqUrls, clients } = emulators();
    for (const queue of ['run-tests', BUILD_EVENTS]) {
      for (const url of [queueUrls[queue], dlqUrls[queue]])
        await clients.sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
    }
    h = stageHarness(emulators(), 'run_tests');
    builds = 0;
    codebuild.on(StartBuildCommand).callsFake(() => ({ build: { id: `tests:${++builds}` } }));
  });
  afterEach(() => codebuild.reset());

  const runner = () => new CodeBuildTestRunner(new CodeBuildClient({ region: 'us-east-1' }), 'tests');
  const options = (events?: EventPublisher) => ({
    ...emulatorWorkerOptions(emulators(), { events: h.events, clock: { now: () => h.now } }),
    ...(events && { events }),
  });

  function stage() {
    const run = createCommandStageHandler(
      'run_tests',
      localCommandStageDeps('run_tests', { ...options(), leaseSeconds: LEASE_SECONDS, runner: runner() }),
    );
    return (records: SQSRecord[]) => run({ Records: records });
  }

  function completion(events?: EventPublisher) {
    const handle = createBuildEventsHandler({
      ...localCompletionDeps(options(events)),
      parse: parseCodeBuildEvent,
      backoff: { baseSeconds: 0, capSeconds: 0 },
    });
    return (records: SQSRecord[]) => handle({ Records: records });
  }

  const reconcile = (events?: EventPublisher) =>
    reconcileBuilds({ ...localCompletionDeps(options(events)), runner: runner() });

  function job(payload: StageMessage<'run_tests'>['payload'] = { command: 'npm test' }): StageMessage<'run_tests'> {
    return {
      jobId: `job-${randomUUID().slice(0, 8)}`,
      workspaceId: 'ws-1',
      tenantId: 't-1',
      type: 'run_tests',
      createdAt: '2026-11-29T11:00:00.000Z',
      payload,
      pin: { sha, repoUrl: 'https://git.example/acme/widgets.git', branch: 'agent/ws-1' },
    };
  }

  /** Puts a completion event for `buildId` on the build-events queue, as the EventBridge rule does. */
  async function emit(
    message: StageMessage<'run_tests'>,
    buildId: string,
    status: string,
    extra: Partial<Parameters<typeof codeBuildStateChange>[0]> = {},
  ): Promise<string> {
    const body = JSON.stringify(
      codeBuildStateChange({
        buildId,
        status,
        jobId: message.jobId,
        jobType: message.type,
        sha: message.pin.sha,
        ...extra,
      }),
    );
    await emulators().clients.sqs.send(
      new SendMessageCommand({ QueueUrl: emulators().queueUrls[BUILD_EVENTS], MessageBody: body }),
    );
    return body;
  }

  async function sendRawEvent(body: string): Promise<void> {
    await emulators().clients.sqs.send(
      new SendMessageCommand({ QueueUrl: emulators().queueUrls[BUILD_EVENTS], MessageBody: body }),
    );
  }

  const outcomes = (jobId: string) => h.events.filter((e) => e.detail['jobId'] === jobId).map((e) => e.type);

  /** A job forwarded and started: RUNNING with build `tests:<n>`. */
  async function running(message = job()): Promise<{ message: StageMessage<'run_tests'>; buildId: string }> {
    await h.forward(message);
    expect((await h.deliver(stage())).failed).toBe(false);
    const record = await h.ledger.getJob(message.jobId);
    expect(record).toMatchObject({ status: 'RUNNING' });
    return { message, buildId: record?.progress?.['buildId'] ?? '' };
  }

  it('starts one build and acknowledges without waiting: RUNNING, its build id recorded, no poll, no outcome yet', async () => {
    const message = job({ command: 'npm test', timeoutSeconds: 2 * HOUR });
    await h.forward(message);

    const delivery = await h.deliver(stage());

    expect(delivery.failed).toBe(false);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'RUNNING',
      progress: { buildId: 'tests:1' },
      dueAt: h.now + dueAfterMs(2 * HOUR),
      stageMessage: JSON.stringify(message),
    });
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    expect(codebuild.commandCalls(StartBuildCommand)[0]?.args[0].input.timeoutInMinutesOverride).toBe(120);
    expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(0);
    expect(outcomes(message.jobId)).toEqual([]);
  });

  it('records the verdict of the completion event once and publishes one outcome event', async () => {
    const { message, buildId } = await running();
    await emit(message, buildId, 'SUCCEEDED');

    expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);

    const record = await h.ledger.getJob(message.jobId);
    expect(record).toMatchObject({
      status: 'SUCCEEDED',
      result: { verdict: 'passed', summary: 'tests passed', exitCode: 0, sha, buildId },
      reportedAt: expect.any(String),
    });
    expect(record?.dueAt).toBeUndefined();
    expect(h.events.filter((e) => e.detail['jobId'] === message.jobId)).toEqual([
      {
        type: 'AgentJobSucceeded',
        detail: expect.objectContaining({
          jobId: message.jobId,
          type: 'run_tests',
          result: expect.objectContaining({ verdict: 'passed' }),
        }),
      },
    ]);
  });

  it('records failing tests as a successful job with verdict failed', async () => {
    const { message, buildId } = await running();
    await emit(message, buildId, 'FAILED', {
      failedPhase: {
        type: 'BUILD',
        context: 'COMMAND_EXECUTION_ERROR: Error while executing command: npm test. Reason: exit status 1',
      },
    });

    await deliverOne(emulators(), BUILD_EVENTS, completion());

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      result: { verdict: 'failed', summary: 'tests failed', exitCode: 1 },
    });
    expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
  });

  it('duplicate, late and out-of-order events change nothing: one verdict, one outcome event, one build', async () => {
    const { message, buildId } = await running();
    const succeeded = await emit(message, buildId, 'SUCCEEDED');
    await sendRawEvent(succeeded);
    await emit(message, buildId, 'FAULT');
    await emit(message, buildId, 'IN_PROGRESS');

    for (let i = 0; i < 4; i++) expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      attempt: 1,
      result: { verdict: 'passed', buildId },
    });
    expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    expect(await h.dlqMessages()).toEqual([]);
  });

  it('a completion that arrives before the job is RUNNING is retried, then recorded', async () => {
    const message = job();
    await h.forward(message);
    // The stage started and recorded the build, and is a write away from RUNNING.
    const { pin: _pin, ...envelope } = message;
    await h.ledger.claim({
      job: envelope,
      digest: jobDigest(envelope),
      owner: 'stage-1',
      now: h.now,
      leaseMs: LEASE_SECONDS * 1000,
      consumer: 'stage',
      pin: message.pin,
    });
    await h.ledger.recordProgress({
      jobId: message.jobId,
      owner: 'stage-1',
      progress: { buildId: 'tests:early' },
      now: h.now,
    });
    await emit(message, 'tests:early', 'SUCCEEDED');

    expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(true);
    await h.ledger.complete({
      jobId: message.jobId,
      owner: 'stage-1',
      now: h.now,
      verdict: { status: 'RUNNING', dueAt: h.now + 1000, stageMessage: JSON.stringify(message) },
    });
    expect(await deliverOne(emulators(), BUILD_EVENTS, completion())).toEqual({ failed: false, receiveCount: 2 });

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      result: { buildId: 'tests:early' },
    });
    expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
  });

  it("a build that ends before its stage recorded it (the start's answer was lost) is completed once a redelivery records it, not left to the reconciler", async () => {
    const message = job();
    await h.forward(message);
    // The stage asked for the build and lost the answer: only its start mark is recorded.
    const { pin: _pin, ...envelope } = message;
    await h.ledger.claim({
      job: envelope,
      digest: jobDigest(envelope),
      owner: 'stage-1',
      now: h.now,
      leaseMs: LEASE_SECONDS * 1000,
      consumer: 'stage',
      pin: message.pin,
    });
    await h.ledger.recordProgress({
      jobId: message.jobId,
      owner: 'stage-1',
      progress: { startRequestedAt: new Date(h.now).toISOString() },
      now: h.now,
    });
    await emit(message, 'tests:lost-answer', 'SUCCEEDED');

    expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(true);
    // The redelivery finds the build and records it, then the job RUNNING.
    await h.ledger.recordProgress({
      jobId: message.jobId,
      owner: 'stage-1',
      progress: { buildId: 'tests:lost-answer' },
      now: h.now,
    });
    await h.ledger.complete({
      jobId: message.jobId,
      owner: 'stage-1',
      now: h.now,
      verdict: { status: 'RUNNING', dueAt: h.now + 1000, stageMessage: JSON.stringify(message) },
    });
    expect(await deliverOne(emulators(), BUILD_EVENTS, completion())).toEqual({ failed: false, receiveCount: 2 });

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      result: { buildId: 'tests:lost-answer' },
    });
    expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
  });

  it.each(['FAULT', 'TIMED_OUT', 'STOPPED'])(
    'a build that ends %s fails the job once: TEST_RUN_ERROR, the message copy on the stage DLQ, one event',
    async (status) => {
      const { message, buildId } = await running();
      await emit(message, buildId, status);
      await emit(message, buildId, status);

      const sends = recordSends(emulators().clients.sqs);
      try {
        await deliverOne(emulators(), BUILD_EVENTS, completion());
        await deliverOne(emulators(), BUILD_EVENTS, completion());
      } finally {
        sends.stop();
      }

      expect(await h.ledger.getJob(message.jobId)).toMatchObject({
        status: 'FAILED',
        error: { reason: 'TEST_RUN_ERROR', message: expect.stringContaining(`tests run ${status}`) },
      });
      expect(sends.sent.map((s) => s.MessageGroupId)).toEqual([message.tenantId]);
      const dead = await h.dlqMessages();
      expect(dead).toHaveLength(1);
      expect(dead[0]?.Body).toBe(JSON.stringify(message));
      expect(dead[0]?.MessageAttributes?.['reason']?.StringValue).toBe('TEST_RUN_ERROR');
      expect(dead[0]?.MessageAttributes?.['jobId']?.StringValue).toBe(message.jobId);
      expect(outcomes(message.jobId)).toEqual(['AgentJobFailed']);
    },
  );

  it("a redrive of a broken build's job starts a new build (a new run), and the old run's late events change nothing", async () => {
    const { message, buildId: first } = await running();
    await emit(message, first, 'FAULT');
    await deliverOne(emulators(), BUILD_EVENTS, completion());
    const failed = await h.ledger.getJob(message.jobId);
    expect(failed).toMatchObject({ status: 'FAILED' });
    expect(failed?.run).toBeUndefined();

    // `dlq redrive` records its token on the job, then sends the message back carrying it (decisions §2, §26).
    await h.ledger.authorizeRedrive({ jobId: message.jobId, token: 'redrive-1', now: h.now });
    const attributes = stringAttributes({ ...jobAttributes(message), [REDRIVE_ATTRIBUTE]: 'redrive-1' });
    await emulators().clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: emulators().queueUrls['run-tests'],
        MessageBody: JSON.stringify(message),
        MessageAttributes: attributes,
      }),
    );
    expect((await h.deliver(stage())).failed).toBe(false);

    const rerun = await h.ledger.getJob(message.jobId);
    expect(rerun).toMatchObject({ status: 'RUNNING', run: 1, progress: { buildId: 'tests:2' } });
    const tokens = codebuild.commandCalls(StartBuildCommand).map((c) => c.args[0].input.idempotencyToken);
    expect(new Set(tokens).size).toBe(2);
    expect(codebuild.commandCalls(StartBuildCommand)[1]?.args[0].input.environmentVariablesOverride).toContainEqual({
      name: 'JOB_RUN',
      value: '1',
      type: 'PLAINTEXT',
    });

    await emit(message, first, 'SUCCEEDED'); // the first run's build, late
    await emit(message, 'tests:2', 'SUCCEEDED');
    await deliverOne(emulators(), BUILD_EVENTS, completion());
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'RUNNING' });
    await deliverOne(emulators(), BUILD_EVENTS, completion());

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      run: 1,
      result: { buildId: 'tests:2' },
    });
    expect(outcomes(message.jobId)).toEqual(['AgentJobFailed', 'AgentJobSucceeded']);
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(2);
  });

  it('redeliveries of the stage message while the build runs and after it ended start nothing and report nothing', async () => {
    const { message, buildId } = await running();
    await h.sendRaw(JSON.stringify(message));
    expect((await h.deliver(stage())).failed).toBe(false);
    await emit(message, buildId, 'SUCCEEDED');
    await deliverOne(emulators(), BUILD_EVENTS, completion());
    await h.sendRaw(JSON.stringify(message));
    expect((await h.deliver(stage())).failed).toBe(false);

    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
  });

  it('finds the build a stage started but died before recording, instead of starting a second', async () => {
    const message = job();
    await h.forward(message);
    const { pin: _pin, ...envelope } = message;
    await h.ledger.claim({
      job: envelope,
      digest: jobDigest(envelope),
      owner: 'dead-stage',
      now: h.now,
      leaseMs: LEASE_SECONDS * 1000,
      consumer: 'stage',
      pin: message.pin,
    });
    const startRequestedAt = new Date(h.now).toISOString();
    await h.ledger.recordProgress({
      jobId: message.jobId,
      owner: 'dead-stage',
      progress: { startRequestedAt },
      now: h.now,
    });
    h.now += (LEASE_SECONDS + 1) * 1000;
    const buildOf = (id: string, key: string): Build => ({
      id,
      environment: {
        type: 'LINUX_CONTAINER',
        image: 'i',
        computeType: 'BUILD_GENERAL1_SMALL',
        environmentVariables: [
          { name: 'JOB_ID', value: message.jobId },
          { name: 'JOB_RUN', value: '0' },
          { name: 'JOB_RUN_KEY', value: key },
        ],
      },
    });
    // tests:8 is an earlier job's of the same id and run (sent before its record expired): not this job's.
    const earlier = buildOf('tests:8', runKey(message, 0, '2025-01-01T00:00:00.000Z'));
    codebuild.on(ListBuildsForProjectCommand).resolves({ ids: ['tests:9', 'tests:8', 'tests:7'] });
    codebuild
      .on(BatchGetBuildsCommand)
      .resolves({ builds: [{ id: 'tests:9' }, earlier, buildOf('tests:7', runKey(message, 0, startRequestedAt))] });

    expect((await h.deliver(stage())).failed).toBe(false);

    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(0);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'RUNNING', progress: { buildId: 'tests:7' } });
  });

  describe('the reconciler (missing events)', () => {
    it('completes overdue jobs from one BatchGetBuilds, postpones a build still going, fails an unknown one; late events change nothing', async () => {
      const passed = await running();
      const broken = await running();
      const slow = await running();
      const lost = await running();
      const notDue = await running(job({ timeoutSeconds: 7 * HOUR }));
      codebuild.on(BatchGetBuildsCommand).resolves({
        builds: [
          { id: passed.buildId, buildStatus: 'SUCCEEDED' },
          { id: broken.buildId, buildStatus: 'FAULT' },
          { id: slow.buildId, buildStatus: 'IN_PROGRESS' },
        ],
        buildsNotFound: [lost.buildId],
      });

      expect(await reconcile()).toMatchObject({ due: 0 });
      h.now += dueAfterMs(60 * 60) + 1;
      const report = await reconcile();

      expect(report).toMatchObject({ due: 4, completed: 3, stillRunning: 1 });
      expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(1);
      expect(codebuild.commandCalls(BatchGetBuildsCommand)[0]?.args[0].input.ids).toHaveLength(4);
      expect(await h.ledger.getJob(passed.message.jobId)).toMatchObject({
        status: 'SUCCEEDED',
        result: { verdict: 'passed' },
        reportedAt: expect.any(String),
      });
      expect(await h.ledger.getJob(broken.message.jobId)).toMatchObject({
        status: 'FAILED',
        error: { reason: 'TEST_RUN_ERROR' },
      });
      expect(await h.ledger.getJob(lost.message.jobId)).toMatchObject({
        status: 'FAILED',
        error: { message: expect.stringMatching(/does not know build/) },
      });
      expect(await h.ledger.getJob(slow.message.jobId)).toMatchObject({
        status: 'RUNNING',
        dueAt: h.now + BUILD_DUE_MARGIN_SECONDS * 1000,
      });
      expect(await h.ledger.getJob(notDue.message.jobId)).toMatchObject({ status: 'RUNNING' });
      expect((await h.dlqMessages()).map((m) => m.MessageAttributes?.['jobId']?.StringValue).sort()).toEqual(
        [broken.message.jobId, lost.message.jobId].sort(),
      );

      // The event that never came arrives after all: nothing changes.
      await emit(passed.message, passed.buildId, 'FAILED');
      expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);
      expect(await h.ledger.getJob(passed.message.jobId)).toMatchObject({
        status: 'SUCCEEDED',
        result: { verdict: 'passed' },
      });
      for (const { message } of [passed, broken, lost]) expect(outcomes(message.jobId)).toHaveLength(1);
      expect(await reconcile()).toMatchObject({ due: 0 });
    });

    it('asking before due (a runner whose answers cost nothing): completes an ended build at once, leaves one still going as it is', async () => {
      const ended = await running();
      const going = await running();
      codebuild.on(BatchGetBuildsCommand).resolves({
        builds: [
          { id: ended.buildId, buildStatus: 'SUCCEEDED' },
          { id: going.buildId, buildStatus: 'IN_PROGRESS' },
        ],
      });
      const goingDueAt = (await h.ledger.getJob(going.message.jobId))?.dueAt;

      const report = await reconcileBuilds({ ...localCompletionDeps(options()), runner: runner(), askBeforeDue: true });

      // Jobs earlier tests left RUNNING are asked about too (their builds unknown here): not counted as due.
      expect(report).toMatchObject({ due: 0, stillRunning: 0 });
      expect(await h.ledger.getJob(ended.message.jobId)).toMatchObject({
        status: 'SUCCEEDED',
        reportedAt: expect.any(String),
      });
      expect(await h.ledger.getJob(going.message.jobId)).toMatchObject({ status: 'RUNNING', dueAt: goingDueAt });
      expect(outcomes(ended.message.jobId)).toEqual(['AgentJobSucceeded']);
    });

    it('stops the build of a job cancelled while it ran with one StopBuild; its completion after the cancel changes nothing and announces nothing', async () => {
      const { message, buildId } = await running();
      codebuild.on(StopBuildCommand).resolves({ build: { id: buildId, buildStatus: 'STOPPED' } });
      expect(await h.ledger.cancel(message.jobId, h.now)).toMatchObject({ cancelled: true, previous: 'RUNNING' });

      const report = await reconcile();
      // The STOPPED build's event, as CodeBuild sends it after the stop.
      await emit(message, buildId, 'STOPPED');
      expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);
      await reconcile();

      expect(report).toMatchObject({ stopped: 1, completed: 0 });
      expect(codebuild.commandCalls(StopBuildCommand).map((c) => c.args[0].input)).toEqual([{ id: buildId }]);
      const record = await h.ledger.getJob(message.jobId);
      expect(record).toMatchObject({ status: 'CANCELLED', progress: { buildId }, reportedAt: expect.any(String) });
      expect(record?.dueAt).toBeUndefined();
      expect(outcomes(message.jobId)).toEqual([]);
    });

    it('a build that ends as the cancel is sent: whichever write is first stands, once; the other changes nothing', async () => {
      const { message, buildId } = await running();
      await emit(message, buildId, 'SUCCEEDED');
      expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);

      expect(await h.ledger.cancel(message.jobId, h.now)).toMatchObject({
        cancelled: false,
        record: { status: 'SUCCEEDED' },
      });
      await reconcile();

      expect(codebuild.commandCalls(StopBuildCommand)).toHaveLength(0);
      expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
    });

    it('reports a verdict whose reporter died before publishing, once, after the grace period', async () => {
      const { message, buildId } = await running();
      await emit(message, buildId, 'SUCCEEDED');
      const failingBus: EventPublisher = { publish: async () => Promise.reject(new Error('PutEvents throttled')) };

      expect((await deliverOne(emulators(), BUILD_EVENTS, completion(failingBus))).failed).toBe(false);
      expect(await h.ledger.getJob(message.jobId)).toMatchObject({
        status: 'SUCCEEDED',
        dueAt: h.now + REPORT_GRACE_SECONDS * 1000,
      });
      expect(outcomes(message.jobId)).toEqual([]);
      await emit(message, buildId, 'SUCCEEDED');
      await deliverOne(emulators(), BUILD_EVENTS, completion());
      expect(outcomes(message.jobId)).toEqual([]);

      h.now += REPORT_GRACE_SECONDS * 1000;
      expect(await reconcile()).toMatchObject({ due: 1, reported: 1 });
      expect(await reconcile()).toMatchObject({ due: 0 });

      expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
      expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(0);
    });
  });

  it('moves an unreadable build event to the build-events DLQ with the reason', async () => {
    await sendRawEvent('{"source":"aws.codebuild"');

    expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);

    const { Messages } = await emulators().clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: emulators().dlqUrls[BUILD_EVENTS],
        MessageAttributeNames: ['All'],
        WaitTimeSeconds: 1,
      }),
    );
    expect(Messages?.[0]?.MessageAttributes?.['reason']?.StringValue).toBe('INVALID_BUILD_EVENT');
  });

  it.each([...JOB_TYPE_NAMES.filter((t) => commandStageOf(t) === undefined), 'no_such_type'])(
    'moves a build event naming a %s job (not a command stage) to the build-events DLQ as INVALID_BUILD_EVENT on its first delivery',
    async (type) => {
      const { message, buildId } = await running();
      await emit(message, buildId, 'SUCCEEDED', { jobType: type });

      expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);

      const { Messages } = await emulators().clients.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: emulators().dlqUrls[BUILD_EVENTS],
          MessageAttributeNames: ['All'],
          WaitTimeSeconds: 1,
        }),
      );
      expect(Messages?.map((m) => m.MessageAttributes?.['reason']?.StringValue)).toEqual(['INVALID_BUILD_EVENT']);
      expect(Messages?.[0]?.MessageAttributes?.['errorMessage']?.StringValue).toMatch(
        new RegExp(`${type} is not a command stage`),
      );
      // Nothing left to retry, and the job keeps waiting for its own build's event.
      expect(
        (
          await emulators().clients.sqs.send(
            new ReceiveMessageCommand({ QueueUrl: emulators().queueUrls[BUILD_EVENTS] }),
          )
        ).Messages,
      ).toBeUndefined();
      expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'RUNNING' });
    },
  );

  /**
   * The build's checkout secret is written before StartBuild (build-checkout.ts). Its writes share
   * the region's PutSecretValue quota (50 a second, not adjustable) with the whole account: over
   * the assembly run's Secrets Manager stand-in (emulated, not AWS), refusing requests as a
   * throttled Secrets Manager does, the SDK's own retries included (each attempt takes a refusal).
   */
  describe('a throttled checkout secret waits like the build quota', () => {
    const PREFIX = 'agent-jobs/AgentJobs-test/checkout/';
    const reader = { username: 'reader', password: 'read-only-token' };
    let secretsManager: Awaited<ReturnType<typeof startSecretsManager>>;
    let clients: SecretsManagerClient[];
    let counted: JobMetricName[];

    beforeEach(async () => {
      // The repository's checkout secret holds a credential since rotated: the start writes a version.
      const repoUrl = job().pin.repoUrl;
      secretsManager = await startSecretsManager({
        [newSecretArn(checkoutSecretName(PREFIX, repoUrl))]: JSON.stringify({ ...reader, password: 'before-rotation' }),
      });
      clients = [];
      counted = [];
      // A start requested before looks for its build first (none: the write was refused before StartBuild).
      codebuild.on(ListBuildsForProjectCommand).resolves({ ids: [] });
    });
    afterEach(async () => {
      for (const client of clients) client.destroy();
      await secretsManager.close();
    });

    /** A command stage whose Secrets Manager client makes `sdkAttempts` attempts per request (the SDK's default is three). */
    function throttledStage(sdkAttempts = 1) {
      const client = new SecretsManagerClient({
        endpoint: secretsManager.url,
        region: REGION,
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        maxAttempts: sdkAttempts,
      });
      clients.push(client);
      const noApp = () => {
        throw new Error('the read-only secret holds a user and token');
      };
      const checkout = new SecretsManagerBuildCheckout({
        client,
        secretPrefix: PREFIX,
        readSecret: async () => reader,
        tokensOf: noApp,
        clock: { now: () => h.now },
      });
      const runner = new CodeBuildTestRunner(new CodeBuildClient({ region: 'us-east-1' }), 'tests', checkout);
      const deps = localCommandStageDeps('run_tests', {
        ...options(),
        metrics: { count: (metric) => void counted.push(metric) },
        leaseSeconds: LEASE_SECONDS,
        runner,
      });
      const run = createCommandStageHandler('run_tests', deps);
      return {
        maxReceiveCount: deps.settings.maxReceiveCount,
        invoke: (records: SQSRecord[]) => run({ Records: records }),
      };
    }

    it('a write refused on more deliveries than the queue allows receives: each one a delayed copy, none spent; the build starts when the quota lets it, SUCCEEDED, no DLQ message', async () => {
      // Two attempts per request: the SDK retries the refusal once, then gives up.
      const stage = throttledStage(2);
      const throttledDeliveries = stage.maxReceiveCount + 1;
      secretsManager.refuseNext('PutSecretValue', 2 * throttledDeliveries);
      const message = job();
      await h.forward(message);
      const queueUrl = emulators().queueUrls['run-tests']!;

      const sends = recordSends(emulators().clients.sqs);
      const deliveries: { failed: boolean; receiveCount: number }[] = [];
      try {
        // Until the job is settled (a failure would be, and its message gone to the DLQ).
        const unsettled = async () =>
          ['FORWARDED', 'IN_FLIGHT'].includes((await h.ledger.getJob(message.jobId))?.status ?? '');
        for (let i = 0; i < throttledDeliveries && (await unsettled()); i++)
          deliveries.push(await h.deliver(stage.invoke));
      } finally {
        sends.stop();
      }

      // Each delivery was acknowledged and its job sent again as a fresh copy: the wait spent no receive.
      expect(deliveries).toEqual(
        Array.from({ length: throttledDeliveries }, () => ({ failed: false, receiveCount: 1 })),
      );
      expect(
        sends
          .to(queueUrl)
          .map((copy) => [
            copy.MessageAttributes?.[DEFERRAL_ATTRIBUTES.failedReceives]?.StringValue,
            copy.MessageAttributes?.[DEFERRAL_ATTRIBUTES.deferrals]?.StringValue,
          ]),
      ).toEqual(Array.from({ length: throttledDeliveries }, (_, i) => ['0', String(i + 1)]));
      expect(counted.filter((m) => m === JOB_METRICS.checkoutSecretsThrottled)).toHaveLength(throttledDeliveries);
      expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(0);

      // The quota lets the write through: the build starts with the new version, and its completion ends the job.
      expect((await h.deliver(stage.invoke)).failed).toBe(false);
      const { buildId } = { buildId: (await h.ledger.getJob(message.jobId))?.progress?.['buildId'] ?? '' };
      expect(buildId).toBe('tests:1');
      await emit(message, buildId, 'SUCCEEDED');
      expect((await deliverOne(emulators(), BUILD_EVENTS, completion())).failed).toBe(false);

      expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED' });
      expect(await h.dlqMessages()).toEqual([]);
      expect(outcomes(message.jobId)).toEqual(['AgentJobSucceeded']);
    });

    it.each([
      ['GetSecretValue', 'ThrottlingException'],
      ['PutSecretValue', 'LimitExceededException'],
    ] as const)(
      '%s refused with %s: the job waits (a delayed copy, no receive spent, counted), it does not fail or back off',
      async (operation, type) => {
        const stage = throttledStage();
        secretsManager.refuseNext(operation, 1, type);
        const message = job();
        await h.forward(message);

        const sends = recordSends(emulators().clients.sqs);
        const delivery = await h.deliver(stage.invoke).finally(() => sends.stop());

        expect(delivery.failed).toBe(false);
        expect(sends.to(emulators().queueUrls['run-tests']!)).toEqual([
          expect.objectContaining({ MessageBody: JSON.stringify(message) }),
        ]);
        expect(counted).toContain(JOB_METRICS.checkoutSecretsThrottled);
        expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'IN_FLIGHT', leaseUntil: h.now });
        expect(await h.dlqMessages()).toEqual([]);
      },
    );

    it("a new repository's CreateSecret refused with ThrottlingException waits the same way", async () => {
      const stage = throttledStage();
      secretsManager.refuseNext('CreateSecret', 1);
      const message = { ...job(), pin: { ...job().pin, repoUrl: 'https://git.example/acme/gadgets.git' } };
      await h.forward(message);

      expect((await h.deliver(stage.invoke)).failed).toBe(false);

      expect(counted).toContain(JOB_METRICS.checkoutSecretsThrottled);
      expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'IN_FLIGHT' });
      expect((await h.deliver(stage.invoke)).failed).toBe(false);
      expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'RUNNING' });
    });
  });

  it('sends a message for another job type to the DLQ as invalid', async () => {
    const wrong = { ...job(), type: 'open_pr', payload: { baseBranch: 'main', title: 't' } };
    await h.sendRaw(JSON.stringify(wrong));

    expect((await h.deliver(stage())).failed).toBe(false);

    expect(codebuild.calls()).toHaveLength(0);
    const dead = (await h.dlqMessages()).find((m) => m.MessageAttributes?.['reason']?.StringValue === 'INVALID_JOB');
    expect(dead?.MessageAttributes?.['errorMessage']?.StringValue).toMatch(/run-tests queue received a open_pr job/);
  });
});
